/* A temporary folder for the C tests that write files (one copy, not one per test): make it,
 * name files in it, write bytes to one, remove it; and removing a flat folder a test made
 * itself (test_rm_dir). cli_test_util.h builds on it. */
#ifndef SN_TMP_TEST_UTIL_H
#define SN_TMP_TEST_UTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char test_tmpdir[256];

/* Makes /tmp/PREFIX_XXXXXX as test_tmpdir; false (and perror's line) when it cannot. */
static inline bool test_tmpdir_make(const char *prefix) {
    snprintf(test_tmpdir, sizeof test_tmpdir, "/tmp/%s_XXXXXX", prefix);
    if (!mkdtemp(test_tmpdir)) {
        perror("mkdtemp");
        return false;
    }
    return true;
}

/* Removes the folder and what the test wrote in it. */
static inline void test_tmpdir_remove(void) {
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", test_tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", test_tmpdir);
}

/* name inside the temporary folder (one of 64 rotating buffers) */
static inline const char *test_tmp(const char *name) {
    static char bufs[64][320];
    static int n;
    char *p = bufs[n++ % 64];
    snprintf(p, 320, "%s/%s", test_tmpdir, name);
    return p;
}

/* Whether msg has "0x" or "0X" text (a pointer or raw bytes printed) outside the
 * temporary folder's name: mkdtemp's six random letters spell "0x" about once in 800 runs. */
static inline bool test_has_0x(const char *msg) {
    size_t dn = strlen(test_tmpdir);
    for (const char *p = msg; *p; p++) {
        if (dn && strncmp(p, test_tmpdir, dn) == 0) {
            p += dn - 1;
            continue;
        }
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) return true;
    }
    return false;
}

/* Writes n bytes to path (a set-up failure is printed; the checks then fail). */
static inline void test_write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0)
        fprintf(stderr, "test setup: cannot write %s\n", path);
}

/* Removes dir and the files in it (one level: what a checkpoint folder holds), without a
 * shell. */
static inline void test_rm_dir(const char *dir) {
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

#endif
