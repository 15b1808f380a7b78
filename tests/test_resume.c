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
} cfg;

typedef struct run {
    sn_model *m;
    sn_strategy *s;
    sn_dataset *tr, *va;
    sn_history *h;
    sn_status st;
} run;

static void run_free(run *r) {
    if (r->m) sn_model_set_strategy(r->m, NULL);
    sn_model_free(r->m);
    sn_strategy_free(r->s);
    sn_dataset_free(r->tr);
    sn_dataset_free(r->va);
    sn_history_free(r->h);
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

static void rm_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        remove(p);
    }
    closedir(d);
    rmdir(dir);
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
    rm_dir(dir);
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
    rm_dir(dir);
}

/* The newest checkpoint torn (truncated) and another corrupted (a flipped byte in the middle,
 * where the variables are): both are skipped with a warning, the run resumes from the next
 * valid one and still ends bit-identical. */
static void test_corrupt(void) {
    cfg c = {.name = "corrupt", .spe = 1, .every = 7, .opt = SN_ADAM};
    char dir[256];
    snprintf(dir, sizeof dir, "/tmp/sn_test_resume_%d_corrupt", (int)getpid());
    rm_dir(dir);
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
    struct stat sb;
    CHECK(stat(paths[n - 1], &sb) == 0, "stat %s", paths[n - 1]);
    CHECK(truncate(paths[n - 1], sb.st_size / 2) == 0, "truncate %s", paths[n - 1]);
    FILE *f = fopen(paths[n - 2], "r+b");
    CHECK(f != NULL, "open %s", paths[n - 2]);
    if (f) {
        CHECK(stat(paths[n - 2], &sb) == 0, "stat");
        /* one byte flipped in every 4 KiB: surely inside the data */
        for (long off = 4096; off < sb.st_size - 1; off += 4096) {
            fseek(f, off, SEEK_SET);
            int ch = fgetc(f);
            fseek(f, off, SEEK_SET);
            fputc(ch ^ 0x5a, f);
        }
        fclose(f);
    }
    FILE *log = tmpfile();
    sn_backup_opts rb = sn_backup_defaults();
    rb.dir = dir;
    rb.every_steps = c.every;
    rb.log = log;
    run rs = fit_once(&c, &rb);
    CHECK_OK(rs.st);
    CHECK(rs.st == SN_OK && same_vars(&ref, &rs), "fallback resume differs");
    fflush(log);
    rewind(log);
    char text[4096] = {0};
    size_t got = fread(text, 1, sizeof text - 1, log);
    text[got] = 0;
    fclose(log);
    char want[600];
    snprintf(want, sizeof want, "Resuming from %s", paths[n - 3]);
    CHECK(strstr(text, want) != NULL, "log does not say '%s':\n%s", want, text);
    CHECK(strstr(text, "Warning") && strstr(text, "not readable"),
          "no corruption warning in:\n%s", text);
    run_free(&rs);

out:
    run_free(&ck);
    run_free(&ref);
    rm_dir(dir);
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
    sn_tensor_free(train_x);
    sn_tensor_free(train_y);
    sn_tensor_free(val_x);
    sn_tensor_free(val_y);
    return sn_test_finish("test_resume");
}
