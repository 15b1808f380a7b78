/* Checkpoints and bit-exact resume (BackupAndRestore built into fit): a fit that writes
 * checkpoints ends where one without them ends, and a new model resumed from EVERY checkpoint
 * of that run (mid-epoch, epoch ends, the partial last batch) ends with the same variable
 * buffer, byte for byte, and the same history: plain, steps_per_execution > 1, dropout with a
 * reshuffled pipeline, and two mirrored replicas. Then a torn newest checkpoint (fallback to
 * the previous one, with a warning), and checkpoints of another model or optimizer (errors
 * naming the variable). Exits 77 when Fashion-MNIST is not installed. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sinter/dist.h"
#include "sinter/nn.h"
#include "sn_test.h"
#include "tmp_test_util.h"
#include "fmnist_test_util.h"

#define N_TRAIN 600
#define N_VAL 200

static sn_tensor *train_x, *train_y, *val_x, *val_y;

typedef struct cfg {
    const char *name;
    int spe;
    double dropout;
    uint64_t shuffle_seed;
    int replicas;      /* 0: no strategy */
    int64_t every;     /* checkpoint every N steps; 0: each epoch */
    int64_t steps_per_epoch;
    sn_optimizer_type opt;
    int64_t hidden;
    const char *csv;   /* a CSV logger's path, or NULL */
} cfg;

typedef struct run {
    sn_model *m;
    sn_strategy *s;
    sn_dataset *tr, *va;
    sn_history *h;
    sn_callback *csv;
    sn_status st;
} run;

static void run_free(run *r) {
    if (r->m) sn_model_set_strategy(r->m, NULL);
    sn_model_free(r->m);
    sn_strategy_free(r->s);
    sn_dataset_free(r->tr);
    sn_dataset_free(r->va);
    sn_history_free(r->h);
    sn_callback_free(r->csv);
}

/* A new model, datasets and (optionally) strategy, then fit with `backup`. */
static run fit_once(const cfg *c, const sn_backup_opts *backup) {
    run r = {0};
    r.m = sn_sequential_new("mlp");
    CHECK_OK(sn_model_add(r.m, sn_layer_flatten()));
    CHECK_OK(sn_model_add(r.m, sn_layer_dense(c->hidden ? c->hidden : 32, SN_ACT_RELU)));
    if (c->dropout > 0) CHECK_OK(sn_model_add(r.m, sn_layer_dropout(c->dropout)));
    CHECK_OK(sn_model_add(r.m, sn_layer_dense(10, SN_ACT_NONE)));
    CHECK_OK(sn_model_build(r.m, &(sn_shape){.ndim = 3, .dim = {28, 28, 1}}, 5));
    sn_compile_opts co = sn_compile_defaults();
    co.optimizer = sn_optimizer_defaults(c->opt);
    co.steps_per_execution = c->spe;
    CHECK_OK(sn_model_compile(r.m, &co));
    if (c->replicas) {
        CHECK_OK(sn_strategy_mirrored(c->replicas, NULL, &r.s));
        CHECK_OK(sn_model_set_strategy(r.m, r.s));
    }
    r.tr = fmnist_ds(train_x, train_y, N_TRAIN, 32, c->shuffle_seed, true);
    r.va = fmnist_ds(val_x, val_y, N_VAL, 100, 0, true);
    sn_fit_opts f = sn_fit_defaults();
    f.epochs = 3;
    f.steps_per_epoch = c->steps_per_epoch;
    f.validation = r.va;
    f.backup = backup;
    if (c->csv) {
        r.csv = sn_callback_csv_logger(c->csv);
        CHECK(r.csv != NULL, "csv logger: %s", sn_last_error());
        f.callbacks = &r.csv;
        f.n_callbacks = 1;
    }
    r.st = sn_model_fit(r.m, r.tr, &f, &r.h);
    return r;
}

static bool same_vars(run *a, run *b) {
    size_t na = 0, nb = 0;
    const void *pa = sn_graph_variable_buffer(sn_model_graph(a->m), &na);
    const void *pb = sn_graph_variable_buffer(sn_model_graph(b->m), &nb);
    return na == nb && memcmp(pa, pb, na) == 0;
}

static bool same_history(run *a, run *b) {
    int n = sn_history_epochs(a->h);
    if (n != sn_history_epochs(b->h)) return false;
    static const char *names[] = {"loss", "sparse_categorical_accuracy", "val_loss",
                                  "val_sparse_categorical_accuracy"};
    for (int e = 0; e < n; e++)
        for (int k = 0; k < 4; k++) {
            double x = sn_history_get(a->h, names[k], e), y = sn_history_get(b->h, names[k], e);
            if (memcmp(&x, &y, sizeof x) != 0) return false;
        }
    return true;
}

/* Checkpoint paths of dir, sorted by name (= by step: fixed width). */
static int list(const char *dir, char paths[][512], int cap) {
    DIR *d = opendir(dir);
    int n = 0;
    if (!d) return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < cap;)
        if (strncmp(e->d_name, "ckpt-", 5) == 0 && strstr(e->d_name, ".h5") &&
            !strstr(e->d_name, ".tmp"))
            snprintf(paths[n++], 512, "%s/%s", dir, e->d_name);
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(paths[j], paths[j - 1]) < 0; j--) {
            char t[512];
            memcpy(t, paths[j], 512);
            memcpy(paths[j], paths[j - 1], 512);
            memcpy(paths[j - 1], t, 512);
        }
    return n;
}

static void test_case(const cfg *c) {
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/sn_test_resume_%d_%s", (int)getpid(), c->name);
    test_rm_dir(dir);
    run ref = fit_once(c, NULL);
    CHECK_OK(ref.st);

    sn_backup_opts b = sn_backup_defaults();
    b.dir = dir;
    b.every_steps = c->every;
    b.keep = 1000;
    run ck = fit_once(c, &b);
    CHECK_OK(ck.st);
    CHECK(same_vars(&ref, &ck) && same_history(&ref, &ck),
          "%s: writing checkpoints changed the run", c->name);

    char paths[200][512];
    int n = list(dir, paths, 200);
    CHECK(n >= 3, "%s: only %d checkpoints in %s", c->name, n, dir);
    int ok = 0;
    for (int i = 0; i < n; i++) {
        sn_backup_opts rb = sn_backup_defaults();
        rb.resume_path = paths[i];
        run rs = fit_once(c, &rb);
        CHECK_OK(rs.st);
        bool same = rs.st == SN_OK && same_vars(&ref, &rs) && same_history(&ref, &rs);
        CHECK(same, "%s: resumed from %s, the weights or history differ", c->name, paths[i]);
        ok += same;
        run_free(&rs);
    }
    printf("%s: %d of %d resumes bit-identical\n", c->name, ok, n);

    /* Resuming the folder itself: the newest checkpoint is the end state. */
    sn_backup_opts db = sn_backup_defaults();
    db.dir = dir;
    db.every_steps = c->every;
    FILE *log = tmpfile();
    db.log = log;
    run rd = fit_once(c, &db);
    CHECK_OK(rd.st);
    CHECK(rd.st == SN_OK && same_vars(&ref, &rd), "%s: resuming the folder", c->name);
    run_free(&rd);
    fclose(log);
    run_free(&ck);
    run_free(&ref);
    test_rm_dir(dir);
}

/* The user block sinter reserves before HDF5's superblock (src/io/checkpoint_io.h). */
#define SN_TEST_USERBLOCK 512

static void flip_byte(const char *path, long off) {
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL, "open %s", path);
    if (!f) return;
    fseek(f, off, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
}

/* fit_once with the backup's log captured into text. */
static run fit_logged(const cfg *c, sn_backup_opts *b, char *text, size_t cap) {
    FILE *log = tmpfile();
    b->log = log;
    run r = fit_once(c, b);
    b->log = NULL;
    fflush(log);
    rewind(log);
    size_t got = fread(text, 1, cap - 1, log);
    text[got] = 0;
    fclose(log);
    return r;
}

/* The newest checkpoint corrupted (one byte of HDF5's superblock flipped) and the one before
 * torn (truncated): both are skipped with a warning naming the file and what is wrong, the
 * run resumes from the next valid one and still ends bit-identical. Then every checkpoint
 * damaged: an error, no fresh start. Then a format-1 file (no header): refused. */
static void test_corrupt(void) {
    cfg c = {.name = "corrupt", .spe = 1, .every = 7, .opt = SN_ADAM};
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/sn_test_resume_%d_corrupt", (int)getpid());
    test_rm_dir(dir);
    run ref = fit_once(&c, NULL);
    sn_backup_opts b = sn_backup_defaults();
    b.dir = dir;
    b.every_steps = c.every;
    b.keep = 4;
    run ck = fit_once(&c, &b);
    CHECK_OK(ck.st);
    char paths[16][512];
    int n = list(dir, paths, 16);
    CHECK(n == 4, "keep 4 left %d checkpoints", n);
    if (n < 3) goto out;
    /* Another architecture, another optimizer: errors naming what differs. */
    sn_backup_opts pb = sn_backup_defaults();
    pb.resume_path = paths[0];
    cfg wide = c;
    wide.hidden = 48;
    run rw = fit_once(&wide, &pb);
    CHECK(rw.st == SN_ERR_SHAPE && strstr(sn_last_error(), "dense/kernel"),
          "other shapes: %s: %s", sn_status_name(rw.st), sn_last_error());
    run_free(&rw);
    cfg sgd = c;
    sgd.opt = SN_SGD;
    run rg = fit_once(&sgd, &pb);
    CHECK(rg.st == SN_ERR_INVALID && strstr(sn_last_error(), "optimizer 'adam'"),
          "other optimizer: %s: %s", sn_status_name(rg.st), sn_last_error());
    run_free(&rg);
    /* The newest: one byte flipped in HDF5's superblock (its end-of-file address), which
     * HDF5 parses before anything else; the one before: torn (half of it). */
    struct stat sb;
    flip_byte(paths[n - 1], SN_TEST_USERBLOCK + 41);
    CHECK(stat(paths[n - 2], &sb) == 0, "stat %s", paths[n - 2]);
    CHECK(truncate(paths[n - 2], sb.st_size / 2) == 0, "truncate %s", paths[n - 2]);
    char text[8192];
    sn_backup_opts rb = sn_backup_defaults();
    rb.dir = dir;
    rb.every_steps = c.every;
    run rs = fit_logged(&c, &rb, text, sizeof text);
    CHECK_OK(rs.st);
    CHECK(rs.st == SN_OK && same_vars(&ref, &rs), "fallback resume differs");
    char want[1200];
    snprintf(want, sizeof want, "Resuming from %s", paths[n - 3]);
    CHECK(strstr(text, want) != NULL, "log does not say '%s':\n%s", want, text);
    snprintf(want, sizeof want, "Warning: checkpoint '%s' is not readable: whole-file checksum "
             "mismatch", paths[n - 1]);
    CHECK(strstr(text, want) != NULL, "no warning '%s' in:\n%s", want, text);
    snprintf(want, sizeof want, "Warning: checkpoint '%s' is not readable: it has %lld bytes but "
             "was written with %lld: the file is torn (truncated); using the previous checkpoint",
             paths[n - 2], (long long)(sb.st_size / 2), (long long)sb.st_size);
    CHECK(strstr(text, want) != NULL, "no warning '%s' in:\n%s", want, text);
    run_free(&rs);

    /* Every checkpoint damaged (that run wrote new ones): an error naming the folder, and no
     * training from scratch behind the user's back. */
    n = list(dir, paths, 16);
    CHECK(n >= 2, "%d checkpoints after the fallback run", n);
    for (int i = 0; i < n; i++) {
        CHECK(stat(paths[i], &sb) == 0, "stat %s", paths[i]);
        flip_byte(paths[i], sb.st_size / 2 + i);
    }
    rs = fit_logged(&c, &rb, text, sizeof text);
    CHECK(rs.st == SN_ERR_FORMAT && strstr(sn_last_error(), "no valid checkpoint in") &&
              strstr(sn_last_error(), dir) && strstr(sn_last_error(), "--no-resume"),
          "all damaged: %s: %s", sn_status_name(rs.st), sn_last_error());
    for (int i = 0; i < n; i++) {
        snprintf(want, sizeof want, "Warning: checkpoint '%.511s' is not readable", paths[i]);
        CHECK(strstr(text, want) != NULL, "no warning '%s' in:\n%s", want, text);
    }
    run_free(&rs);

    /* A checkpoint of format 1 (an HDF5 file without the header): refused, not opened, and
     * not skipped as damaged. Made by cutting the header off a valid one. */
    char old[600];
    snprintf(old, sizeof old, "%s/ckpt-999999.h5", dir);
    {
        FILE *in = fopen(paths[0], "rb"), *out = fopen(old, "wb");
        CHECK(in && out, "copy %s", paths[0]);
        if (in && out) {
            fseek(in, SN_TEST_USERBLOCK, SEEK_SET);
            for (int ch; (ch = fgetc(in)) != EOF;) fputc(ch, out);
        }
        if (in) fclose(in);
        if (out) fclose(out);
    }
    rs = fit_logged(&c, &rb, text, sizeof text);
    CHECK(rs.st == SN_ERR_UNSUPPORTED && strstr(sn_last_error(), old) &&
              strstr(sn_last_error(), "format 1") && !strstr(text, "Warning"),
          "format 1: %s: %s (log: %s)", sn_status_name(rs.st), sn_last_error(), text);
    run_free(&rs);

out:
    run_free(&ck);
    run_free(&ref);
    test_rm_dir(dir);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* The CSV logger of a resumed fit holds the whole run: a run resumed from each checkpoint
 * (mid-epoch and epoch ends), into a CSV file holding something else, ends with the file of
 * the uninterrupted run, byte for byte. */
static void test_csv_resume(void) {
    char dir[256], ref_csv[300], out_csv[300];
    snprintf(dir, sizeof dir, "/tmp/sn_test_resume_%d_csv", (int)getpid());
    test_rm_dir(dir);
    snprintf(ref_csv, sizeof ref_csv, "%s.ref.csv", dir);
    snprintf(out_csv, sizeof out_csv, "%s.out.csv", dir);
    cfg c = {.name = "csv", .spe = 2, .every = 5, .opt = SN_ADAM, .csv = ref_csv};
    run ref = fit_once(&c, NULL);
    CHECK_OK(ref.st);
    char *want = slurp(ref_csv);
    int lines = 0;
    for (const char *p = want; p && *p; p++) lines += *p == '\n';
    CHECK(want && lines == 4 && strncmp(want, "epoch,loss,", 11) == 0,
          "the uninterrupted CSV is not a header and 3 epochs:\n%s", want ? want : "(none)");
    sn_backup_opts b = sn_backup_defaults();
    b.dir = dir;
    b.every_steps = c.every;
    b.keep = 1000;
    c.csv = NULL;
    run ck = fit_once(&c, &b);
    CHECK_OK(ck.st);
    char paths[64][512];
    int n = list(dir, paths, 64), same = 0;
    CHECK(n >= 5, "only %d checkpoints", n);
    c.csv = out_csv;
    for (int i = 0; i < n && want; i++) {
        FILE *f = fopen(out_csv, "w");
        CHECK(f != NULL, "create %s", out_csv);
        if (f) fputs("epoch,loss\n0,1.0\n", f), fclose(f); /* a stale file */
        sn_backup_opts rb = sn_backup_defaults();
        rb.resume_path = paths[i];
        run rs = fit_once(&c, &rb);
        CHECK_OK(rs.st);
        char *got = slurp(out_csv);
        bool ok = got && strcmp(got, want) == 0;
        CHECK(ok, "resumed from %s, the CSV is\n%s\ninstead of\n%s", paths[i],
              got ? got : "(none)", want);
        same += ok;
        free(got);
        run_free(&rs);
    }
    printf("csv: %d of %d resumed CSV files equal the uninterrupted one\n", same, n);
    free(want);
    run_free(&ck);
    run_free(&ref);
    test_rm_dir(dir);
    remove(ref_csv);
    remove(out_csv);
}

int main(void) {
    if (access(FMNIST "/train-images-idx3-ubyte.gz", R_OK) != 0) {
        printf("test_resume: SKIPPED (Fashion-MNIST not installed)\n");
        return 77;
    }
    CHECK_OK(sn_mnist_load(FMNIST, "train", &train_x, &train_y));
    CHECK_OK(sn_mnist_load(FMNIST, "test", &val_x, &val_y));
    CHECK_OK(sn_device_configure_cpu(2));
    /* 600 examples in batches of 32: 18 full steps and a partial one per epoch. */
    static const cfg cases[] = {
        {.name = "plain", .spe = 1, .every = 5, .opt = SN_ADAM},
        {.name = "spe4", .spe = 4, .every = 6, .opt = SN_ADAM},
        {.name = "dropout_shuffle", .spe = 3, .dropout = 0.3, .shuffle_seed = 11, .every = 4,
         .opt = SN_SGD},
        {.name = "epochs", .spe = 2, .dropout = 0.2, .shuffle_seed = 3, .every = 0,
         .opt = SN_RMSPROP},
        {.name = "mirrored", .spe = 2, .dropout = 0.25, .shuffle_seed = 5, .replicas = 2,
         .every = 5, .steps_per_epoch = 12, .opt = SN_ADAM},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) test_case(&cases[i]);
    test_corrupt();
    test_csv_resume();
    sn_tensor_free(train_x);
    sn_tensor_free(train_y);
    sn_tensor_free(val_x);
    sn_tensor_free(val_y);
    return sn_test_finish("test_resume");
}
