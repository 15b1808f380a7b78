/* Errors are one line a user can act on, and a failed write keeps the old file.
 *
 *  1. Every writer of whole files (checkpoints, weight files, .keras archives, plain files)
 *     on a "full disk": a child process with a file size limit (RLIMIT_FSIZE, SIGXFSZ
 *     ignored, so write(2) fails with EFBIG, as it fails with ENOSPC on a full disk; the shell
 *     test test_disk_full.sh does the real ENOSPC on a tmpfs) rewrites a file that exists.
 *     The call must fail with SN_ERR_IO and one line naming the file and strerror's words,
 *     the old file must be byte-equal and readable, and no temporary file may be left.
 *  2. HDF5's own error record for a failed write (descriptors, a pointer, a ctime line
 *     break) becomes one line with the OS cause: sn_h5_fail on a real H5Dwrite past the limit.
 *  3. sn_errorf keeps messages on one line; sn_foreign_text cleans a library's text. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "io/checkpoint_io.h"
#include "io/h5_util.h"
#include "io/keras_file.h"
#include "sinter/io.h"
#include "sn_test.h"
#include "tmp_test_util.h"

static char *slurp(const char *path, size_t *n) {
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(len > 0 ? (size_t)len : 1);
    if (b && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) *n = (size_t)len;
    return b;
}

/* Names in the test folder holding ".tmp": what a failed write must not leave. */
static int temp_files(void) {
    DIR *d = opendir(test_tmpdir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        if (strstr(e->d_name, ".tmp")) n++;
    if (d) closedir(d);
    return n;
}

static void check_line(const char *what, const char *msg) {
    CHECK(!strpbrk(msg, "\n\r"), "%s: the message has a line break: '%s'", what, msg);
    CHECK(!test_has_0x(msg), "%s: the message has 0x text: '%s'", what, msg);
    CHECK(!strstr(msg, "errno =") && !strstr(msg, "file descriptor"),
          "%s: the message carries HDF5's record: '%s'", what, msg);
}

/* ---- running a writer past a file size limit --------------------------------------------- */

typedef sn_status (*writer_fn)(const char *path);

typedef struct {
    sn_status st;
    char msg[1024];
} child_result;

/* Runs fn(path) in a child whose files may not grow past `limit` bytes. */
static child_result limited(writer_fn fn, const char *path, rlim_t limit) {
    child_result r = {.st = SN_OK, .msg = ""};
    int fds[2];
    if (pipe(fds) != 0) {
        r.st = SN_ERR_IO;
        snprintf(r.msg, sizeof r.msg, "pipe: %s", strerror(errno));
        return r;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {limit, limit};
        child_result c = {.st = SN_ERR_STATE, .msg = "setrlimit failed"};
        if (setrlimit(RLIMIT_FSIZE, &rl) == 0) {
            c.st = fn(path);
            snprintf(c.msg, sizeof c.msg, "%s", sn_last_error());
        }
        ssize_t w = write(fds[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1); /* _exit: no HDF5 atexit clean-up in the child */
    }
    close(fds[1]);
    ssize_t got = pid > 0 ? read(fds[0], &r, sizeof r) : -1;
    close(fds[0]);
    int ws = 0;
    if (pid > 0) waitpid(pid, &ws, 0);
    if (got != (ssize_t)sizeof r || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0) {
        r.st = SN_ERR_STATE;
        snprintf(r.msg, sizeof r.msg, "the child did not report (wait status %d)", ws);
    }
    return r;
}

/* path exists (written by fn without a limit); fn again under `limit` must fail and keep it. */
static void check_full(const char *what, writer_fn fn, const char *path, rlim_t limit) {
    CHECK_OK(fn(path));
    size_t n0 = 0;
    char *before = slurp(path, &n0);
    CHECK(before && n0 > limit, "%s: the first write gave %zu bytes, the test needs more than %llu",
          what, n0, (unsigned long long)limit);
    child_result r = limited(fn, path, limit);
    CHECK(r.st == SN_ERR_IO, "%s: %s (wanted SN_ERR_IO): %s", what, sn_status_name(r.st), r.msg);
    check_line(what, r.msg);
    char want[512];
    snprintf(want, sizeof want, "'%s': %s (the existing file is unchanged)", path, strerror(EFBIG));
    CHECK(strstr(r.msg, "cannot write ") == r.msg && strstr(r.msg, want),
          "%s: message '%s' (wanted \"cannot write ... %s\")", what, r.msg, want);
    size_t n1 = 0;
    char *after = slurp(path, &n1);
    CHECK(after && n1 == n0 && memcmp(before, after, n0) == 0,
          "%s: the existing file changed (%zu bytes before, %zu after)", what, n0, n1);
    CHECK(temp_files() == 0, "%s: %d temporary files left in %s", what, temp_files(), test_tmpdir);
    free(before);
    free(after);
}

/* Each writer is called twice with other contents, so that a half-replaced file would show. */
static int generation;

static float big[65536];

static sn_status write_ckpt(const char *path) {
    generation++;
    for (int i = 0; i < 65536; i++) big[i] = (float)(i * generation);
    const char *names[2] = {"a", "b"};
    sn_ckpt_item it[2] = {
        {.name = "variables/big", .type = SN_CKPT_F32, .shape = {.ndim = 1, .dim = {65536}},
         .data = big},
        {.name = "history/names", .type = SN_CKPT_STR, .shape = {.ndim = 1, .dim = {2}},
         .data = (void *)names},
    };
    return sn_ckpt_write(path, "sinter-checkpoint", 1, 2, it);
}

static sn_status write_weights(const char *path) {
    generation++;
    sn_tensor *k = NULL, *b = NULL;
    sn_shape ks = {.ndim = 2, .dim = {256, 256}}, bs = {.ndim = 1, .dim = {256}};
    sn_status st = sn_tensor_new(&k, SN_F32, &ks);
    if (st == SN_OK) st = sn_tensor_new(&b, SN_F32, &bs);
    if (st == SN_OK) {
        float *kd = sn_tensor_data(k);
        for (int i = 0; i < 65536; i++) kd[i] = (float)(i + generation);
        sn_weight_var v[2] = {{"kernel", k}, {"bias", b}};
        sn_weight_layer L = {"Dense", "dense", 2, v};
        st = sn_weights_save_h5(path, 1, &L, NULL);
    }
    sn_tensor_free(k);
    sn_tensor_free(b);
    return st;
}

static sn_status write_archive(const char *path) {
    generation++;
    for (int i = 0; i < 65536; i++) big[i] = (float)(i - generation);
    sn_keras_archive a = {.config = "{\"class_name\": \"Sequential\"}",
                          .config_len = strlen("{\"class_name\": \"Sequential\"}"),
                          .weights = big, .weights_len = sizeof big};
    return sn_keras_archive_write(path, &a);
}

static sn_status write_plain(const char *path) {
    generation++;
    for (int i = 0; i < 65536; i++) big[i] = (float)(i ^ generation);
    return sn_write_file_atomic(path, big, sizeof big);
}

/* HDF5 writing to disk itself (the sec2 driver), as sinter's writers no longer do: the text
 * of its stack for a write past the limit, through sn_h5_fail. */
static sn_status hdf5_direct(const char *path) {
    sn_status st = SN_OK;
    hid_t f = H5I_INVALID_HID, sp = H5I_INVALID_HID, ds = H5I_INVALID_HID;
    hsize_t n = 65536;
    sn_h5_lock(); /* also turns off HDF5's printing */
    SN_H5(f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5(sp = H5Screate_simple(1, &n, NULL));
    SN_H5(ds = H5Dcreate2(f, "x", H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    SN_H5(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, big));
    SN_H5(H5Fflush(f, H5F_SCOPE_GLOBAL));
done:
    /* Not closed: HDF5 1.10 cannot close a file whose write failed (the child _exits). */
    sn_h5_unlock();
    return st;
}

static void test_full_disk(void) {
    /* 64 KiB: less than each file (256+ KiB), more than nothing. */
    const rlim_t limit = 64 << 10;
    check_full("checkpoint", write_ckpt, test_tmp("ckpt-000001.h5"), limit);
    int n = 0;
    sn_ckpt_item *items = NULL;
    CHECK_OK(sn_ckpt_read(test_tmp("ckpt-000001.h5"), "sinter-checkpoint", 1, &n, &items));
    sn_ckpt_items_free(n, items);
    check_full("weights file", write_weights, test_tmp("w.weights.h5"), limit);
    check_full(".keras archive", write_archive, test_tmp("m.keras"), limit);
    check_full("plain file", write_plain, test_tmp("plain.bin"), limit);

    /* A file that did not exist: the same message without the note, nothing left behind. */
    child_result r = limited(write_ckpt, test_tmp("new.h5"), limit);
    char want[512];
    snprintf(want, sizeof want, "cannot write checkpoint '%s': %s", test_tmp("new.h5"),
             strerror(EFBIG));
    CHECK(r.st == SN_ERR_IO && !strcmp(r.msg, want), "new checkpoint: '%s' (wanted '%s')",
          r.msg, want);
    CHECK(access(test_tmp("new.h5"), F_OK) != 0 && temp_files() == 0,
          "a failed first write left a file");

    /* A folder that does not exist. */
    CHECK_ERR(sn_write_file_atomic("/nonexistent-sinter-dir/x.json", "{}", 2), SN_ERR_IO,
              "cannot write file '/nonexistent-sinter-dir/x.json': No such file or directory");

    /* HDF5's record ("file write failed: time = <ctime>\n, filename = ..., file descriptor =
     * 3, errno = 27, error message = 'File too large', buf = 0x..., ...") as one line. */
    r = limited(hdf5_direct, test_tmp("direct.h5"), limit);
    CHECK(r.st == SN_ERR_IO, "HDF5's own write: %s: %s", sn_status_name(r.st), r.msg);
    check_line("HDF5's own write", r.msg);
    char cause[128];
    snprintf(cause, sizeof cause, ": %s (HDF5 ", strerror(EFBIG));
    CHECK(strstr(r.msg, cause) != NULL, "HDF5's own write: '%s' lacks '%s'", r.msg, cause);
    unlink(test_tmp("direct.h5"));
}

/* ---- the text itself ---------------------------------------------------------------------- */

static void test_text(void) {
    sn_errorf(SN_ERR_IO, "a\nb\r\tc");
    CHECK(!strcmp(sn_last_error(), "a b  c"), "sn_errorf kept control bytes: '%s'", sn_last_error());
    sn_errorf(SN_ERR_IO, "inner");
    sn_errorf(SN_ERR_IO, "outer: %s!", sn_last_error()); /* its own buffer as the argument */
    CHECK(!strcmp(sn_last_error(), "outer: inner!"), "'%s'", sn_last_error());
    sn_error_context(SN_ERR_IO, "ctx\n");
    CHECK(!strcmp(sn_last_error(), "ctx : outer: inner!"), "'%s'", sn_last_error());

    static const struct {
        const char *in, *out;
    } cases[] = {
        {"control character 0xa near '\"ab'", "control character \\x0A near '\"ab'"},
        {"unable to decode byte 0xff near '\"'", "unable to decode byte \\xFF near '\"'"},
        {"buf = 0x557c12ab34cd, total write size = 96", "buf = , total write size = 96"},
        {"  time = Tue Dec  1\n, filename = 'x'  ", "time = Tue Dec 1 , filename = 'x'"},
        {"raw \x01\x1b[31m", "raw \\x01\\x1B[31m"},
        {"id 10x2 and 0xg", "id 10x2 and 0xg"},
        {"", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[128];
        sn_foreign_text(out, sizeof out, cases[i].in);
        CHECK(!strcmp(out, cases[i].out), "sn_foreign_text('%s') = '%s' (wanted '%s')",
              cases[i].in, out, cases[i].out);
    }
    char small[6];
    sn_foreign_text(small, sizeof small, "abc\x01\x02\x03");
    CHECK(strlen(small) < sizeof small, "sn_foreign_text overran a 6-byte buffer: '%s'", small);
    char none[1] = {'x'};
    sn_foreign_text(none, 1, "abc");
    CHECK(none[0] == '\0', "a 1-byte buffer holds '%c'", none[0]);
}

int main(void) {
    if (!test_tmpdir_make("sn_test_errmsg")) return 1;
    test_text();
    test_full_disk();
    test_tmpdir_remove();
    return sn_test_finish("test_error_messages");
}
