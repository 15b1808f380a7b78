/* Text data: strict UTF-8 (valid and hostile byte sequences with their offsets), vocabularies
 * (build, look up, encode, decode, JSON save/load and broken vocabulary files), and the text
 * dataset (sequences, the x/y shift, shuffle and batch of int32, the validation split,
 * errors). */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/core.h"
#include "sinter/data.h"
#include "sn_test.h"
#include "tmp_test_util.h"

/* ---- UTF-8 ------------------------------------------------------------------------------ */

static void test_utf8(void) {
    const char *ok = "a\xc3\xb6\xe2\x82\xac\xf0\x9f\x98\x80z"; /* a ö € 😀 z */
    size_t bad = 99;
    CHECK(sn_utf8_validate(ok, strlen(ok), &bad), "valid text rejected at %zu", bad);
    uint32_t want[] = {'a', 0xF6, 0x20AC, 0x1F600, 'z'};
    size_t pos = 0;
    for (int i = 0; i < 5; i++) {
        uint32_t c = 0;
        CHECK(sn_utf8_decode(ok, strlen(ok), &pos, &c) && c == want[i], "cp %d: got U+%04X", i,
              (unsigned)c);
    }
    CHECK(pos == strlen(ok), "decode stopped at %zu", pos);
    /* Hostile sequences and the offset of the first bad one. */
    struct {
        const char *s;
        size_t len, off;
        const char *what;
    } cases[] = {
        {"ab\x80", 3, 2, "lone continuation byte"},
        {"\xc0\x80", 2, 0, "overlong NUL (C0 80)"},
        {"x\xc1\xbf", 3, 1, "overlong (C1)"},
        {"\xe0\x80\x80", 3, 0, "overlong 3-byte"},
        {"\xf0\x80\x80\x80", 4, 0, "overlong 4-byte"},
        {"ok\xed\xa0\x80", 5, 2, "surrogate U+D800"},
        {"\xf4\x90\x80\x80", 4, 0, "above U+10FFFF"},
        {"\xf5\x80\x80\x80", 4, 0, "F5 lead byte"},
        {"\xff", 1, 0, "FF"},
        {"abc\xe2\x82", 5, 3, "cut-short at the end"},
        {"\xe2\x28\xa1", 3, 0, "bad second byte"},
        {"\xc3\xb6\xf0\x9f\x98", 5, 2, "cut-short 4-byte"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bad = 99;
        bool v = sn_utf8_validate(cases[i].s, cases[i].len, &bad);
        CHECK(!v && bad == cases[i].off, "%s: valid=%d offset %zu, wanted %zu", cases[i].what, v,
              bad, cases[i].off);
    }
    /* Encode: round trip on boundaries, refusal of surrogates and > U+10FFFF. */
    uint32_t cps[] = {0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
    for (size_t i = 0; i < sizeof cps / sizeof cps[0]; i++) {
        char b[4];
        int n = sn_utf8_encode(cps[i], b);
        size_t p = 0;
        uint32_t c = 0xFFFFFFFF;
        CHECK(n > 0 && sn_utf8_decode(b, (size_t)n, &p, &c) && c == cps[i] && p == (size_t)n,
              "U+%04X: encoded %d bytes, decoded U+%04X", (unsigned)cps[i], n, (unsigned)c);
    }
    char b[4];
    CHECK(sn_utf8_encode(0xD800, b) == 0 && sn_utf8_encode(0x110000, b) == 0,
          "surrogate or > U+10FFFF encoded");
}

/* ---- vocabularies ------------------------------------------------------------------------ */

static void test_vocab(void) {
    const char *text = "hello w\xc3\xb6rld\n";
    sn_vocab *v = NULL;
    CHECK_OK(sn_vocab_build(&v, text, strlen(text), false));
    if (!v) return;
    uint32_t want[] = {'\n', ' ', 'd', 'e', 'h', 'l', 'o', 'r', 'w', 0xF6};
    CHECK(sn_vocab_size(v) == 10, "size %d", sn_vocab_size(v));
    for (int i = 0; i < 10; i++) {
        CHECK(sn_vocab_char(v, i) == want[i], "id %d is U+%04llX", i, (long long)sn_vocab_char(v, i));
        CHECK(sn_vocab_id(v, want[i]) == i, "U+%04X -> %d", (unsigned)want[i], sn_vocab_id(v, want[i]));
    }
    CHECK(sn_vocab_id(v, 'z') == -1 && sn_vocab_id(v, 0x20AC) == -1, "absent chars found");
    CHECK(sn_vocab_char(v, 10) == -1 && sn_vocab_char(v, -1) == -1, "ids out of range answered");
    char b[4];
    CHECK(sn_vocab_decode(v, 9, b) == 2 && memcmp(b, "\xc3\xb6", 2) == 0, "decode of ö");
    CHECK(sn_vocab_decode(v, 10, b) == 0, "decode of id 10");
    int32_t *ids = NULL;
    int64_t n = 0;
    CHECK_OK(sn_vocab_encode(v, "w\xc3\xb6rld", 6, &ids, &n));
    int32_t wid[] = {8, 9, 7, 5, 2};
    CHECK(n == 5 && ids && memcmp(ids, wid, sizeof wid) == 0, "encode gave %lld ids", (long long)n);
    free(ids);
    CHECK_ERR(sn_vocab_encode(v, "hex", 3, &ids, &n), SN_ERR_INVALID,
              "character 'x' (U+0078) at byte offset 2 is not in the vocabulary (10 characters)");
    CHECK_ERR(sn_vocab_encode(v, "he\xc3", 3, &ids, &n), SN_ERR_FORMAT, "invalid UTF-8 at byte offset 2");

    /* Save and load: the same ids; NUL and a 4-byte character survive JSON. */
    const char *p = test_tmp("v.vocab.json");
    CHECK_OK(sn_vocab_save(v, p));
    sn_vocab *u = NULL;
    CHECK_OK(sn_vocab_load(&u, p));
    CHECK(u && sn_vocab_size(u) == 10 && !sn_vocab_is_bytes(u), "loaded size %d", sn_vocab_size(u));
    for (int i = 0; u && i < 10; i++) CHECK(sn_vocab_char(u, i) == want[i], "loaded id %d", i);
    sn_vocab_free(u);
    sn_vocab_free(v);
    const char odd[] = "a\0b\xf0\x9f\x98\x80";
    CHECK_OK(sn_vocab_build(&v, odd, sizeof odd - 1, false));
    CHECK_OK(sn_vocab_save(v, p));
    u = NULL;
    CHECK_OK(sn_vocab_load(&u, p));
    CHECK(u && sn_vocab_size(u) == 4 && sn_vocab_char(u, 0) == 0 && sn_vocab_char(u, 3) == 0x1F600,
          "NUL / emoji lost in JSON (size %d)", sn_vocab_size(u));
    sn_vocab_free(u);
    sn_vocab_free(v);
    /* Bytes mode: byte values, not characters; invalid UTF-8 is fine. */
    const char raw[] = "\xff\xc3\xb6\xff";
    CHECK_OK(sn_vocab_build(&v, raw, 4, true));
    CHECK(v && sn_vocab_size(v) == 3 && sn_vocab_is_bytes(v) && sn_vocab_char(v, 2) == 0xFF,
          "bytes vocab size %d", sn_vocab_size(v));
    CHECK(sn_vocab_decode(v, 2, b) == 1 && (uint8_t)b[0] == 0xFF, "bytes decode");
    CHECK_OK(sn_vocab_save(v, p));
    u = NULL;
    CHECK_OK(sn_vocab_load(&u, p));
    CHECK(u && sn_vocab_is_bytes(u) && sn_vocab_size(u) == 3 && sn_vocab_char(u, 0) == 0xB6,
          "bytes vocab after load");
    sn_vocab_free(u);
    sn_vocab_free(v);
    CHECK_ERR(sn_vocab_build(&v, "ab\xc3(", 4, false), SN_ERR_FORMAT, "invalid UTF-8 at byte offset 2");
    CHECK_ERR(sn_vocab_build(&v, "", 0, false), SN_ERR_FORMAT, "empty");
    uint32_t unsorted[] = {'b', 'a'};
    CHECK_ERR(sn_vocab_from_chars(&v, unsorted, 2, false), SN_ERR_INVALID, "strictly increasing");
    char *vp = sn_vocab_path_for("m.weights.h5");
    CHECK(vp && strcmp(vp, "m.weights.h5.vocab.json") == 0, "vocab path %s", vp ? vp : "(null)");
    free(vp);

    /* Broken vocabulary files: each an error naming the file and the field. */
    struct {
        const char *json, *needle;
    } bad[] = {
        {"not json", "is not valid JSON"},
        {"[1, 2]", "field \"format\""},
        {"{\"format\": \"other\", \"version\": 1}", "field \"format\""},
        {"{\"format\": \"sinter.vocab\", \"version\": 2, \"mode\": \"utf8\"}", "field \"version\" is 2"},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"ucs2\"}", "field \"mode\" is \"ucs2\""},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"utf8\", \"size\": 1}", "field \"chars\""},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"utf8\", \"size\": 3, "
         "\"chars\": [\"a\", \"b\"]}", "field \"size\" should be 2"},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"utf8\", \"size\": 2, "
         "\"chars\": [\"a\", \"bc\"]}", "\"chars\"[1] should be a string of exactly one character"},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"utf8\", \"size\": 2, "
         "\"chars\": [\"b\", \"a\"]}", "\"chars\"[1] (U+0061) should come after"},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"utf8\", \"size\": 2, "
         "\"chars\": [\"a\", \"a\"]}", "sorted and distinct"},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"bytes\", \"size\": 1, "
         "\"bytes\": [256]}", "\"bytes\"[0] should be an integer in 0..255"},
        {"{\"format\": \"sinter.vocab\", \"version\": 1, \"mode\": \"utf8\", \"size\": 1, "
         "\"chars\": [\"a\"], \"size\": 1}", "is not valid JSON"},
    };
    const char *bp = test_tmp("bad.vocab.json");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        test_write_file(bp, bad[i].json, strlen(bad[i].json));
        u = NULL;
        sn_status s = sn_vocab_load(&u, bp);
        CHECK(s != SN_OK && !u && strstr(sn_last_error(), bad[i].needle) &&
                  strstr(sn_last_error(), bp),
              "case %zu: %s: '%s' (wanted '%s')", i, sn_status_name(s), sn_last_error(),
              bad[i].needle);
        sn_vocab_free(u);
    }
    CHECK_ERR(sn_vocab_load(&u, test_tmp("missing.json")), SN_ERR_IO, "cannot read");
    /* An atomic save leaves no temporary file behind. */
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -q tmp", test_tmpdir);
    CHECK(system(cmd) != 0, "a temporary file was left in %s", test_tmpdir);
}

/* ---- the text dataset -------------------------------------------------------------------- */

/* All elements of one epoch of an unbatched or batched (x, y) dataset, appended to out. */
static int64_t drain(sn_dataset *ds, int32_t *x, int32_t *y, int64_t cap, int64_t *batches) {
    int64_t n = 0;
    *batches = 0;
    for (;;) {
        sn_tensor *b[2];
        bool end = false;
        sn_status s = sn_dataset_next(ds, b, &end);
        CHECK(s == SN_OK, "next: %s", sn_last_error());
        if (s != SN_OK || end) break;
        CHECK(sn_tensor_dtype(b[0]) == SN_I32 && sn_tensor_dtype(b[1]) == SN_I32, "dtypes %s %s",
              sn_dtype_name(sn_tensor_dtype(b[0])), sn_dtype_name(sn_tensor_dtype(b[1])));
        int64_t k = sn_tensor_numel(b[0]);
        if (n + k > cap) break;
        memcpy(x + n, sn_tensor_data(b[0]), (size_t)k * 4);
        memcpy(y + n, sn_tensor_data(b[1]), (size_t)k * 4);
        n += k;
        (*batches)++;
    }
    return n;
}

static int cmp_seq(const void *a, const void *b) { return memcmp(a, b, 4 * 4); }

static void test_text_dataset(void) {
    /* 26 letters, L = 4: 5 sequences of 5 ("abcde" "fghij" "klmno" "pqrst" "uvwxy"), z cut. */
    const char *abc = "abcdefghijklmnopqrstuvwxyz";
    sn_text_opts o = sn_text_defaults();
    o.seq_length = 4;
    o.batch_size = 0;
    o.shuffle_buffer = 0;
    o.validation_split = 0;
    o.prefetch = 0;
    sn_vocab *v = NULL;
    sn_dataset *tr = NULL, *va = NULL;
    sn_text_info info;
    CHECK_OK(sn_text_dataset_from_memory(abc, 26, "abc", &o, &v, &tr, &va, &info));
    CHECK(v && sn_vocab_size(v) == 26 && !va, "vocab %d, validation %p", sn_vocab_size(v), (void *)va);
    CHECK(info.n_units == 26 && info.n_sequences == 5 && info.n_train == 5 && info.n_validation == 0,
          "info %lld %lld %lld %lld", (long long)info.n_units, (long long)info.n_sequences,
          (long long)info.n_train, (long long)info.n_validation);
    CHECK(tr && sn_dataset_cardinality(tr) == 5, "cardinality %lld", (long long)sn_dataset_cardinality(tr));
    int32_t x[400], y[400];
    int64_t nb = 0;
    int64_t n = tr ? drain(tr, x, y, 400, &nb) : 0;
    CHECK(n == 20 && nb == 5, "%lld ids in %lld elements", (long long)n, (long long)nb);
    for (int s = 0; s < 5 && n == 20; s++)
        for (int t = 0; t < 4; t++) {
            CHECK(x[s * 4 + t] == s * 5 + t, "x[%d][%d] = %d", s, t, x[s * 4 + t]);
            CHECK(y[s * 4 + t] == s * 5 + t + 1, "y[%d][%d] = %d", s, t, y[s * 4 + t]);
        }
    sn_dataset_free(tr);
    sn_vocab_free(v);

    /* Shuffle + batch(2, drop) + prefetch over int32, with a validation split of 0.2:
     * n_train = floor(5 * 0.8) = 4 (2 batches), validation = the last sequence ("uvwxy"). */
    o.batch_size = 2;
    o.shuffle_buffer = 10000;
    o.seed = 7;
    o.validation_split = 0.2;
    o.prefetch = 2;
    CHECK_OK(sn_text_dataset_from_memory(abc, 26, "abc", &o, &v, &tr, &va, &info));
    CHECK(info.n_train == 4 && info.n_validation == 1 && tr && va, "split %lld/%lld",
          (long long)info.n_train, (long long)info.n_validation);
    if (tr && va) {
        CHECK(sn_dataset_cardinality(tr) == 2 && sn_dataset_cardinality(va) == 1, "cards %lld %lld",
              (long long)sn_dataset_cardinality(tr), (long long)sn_dataset_cardinality(va));
        int32_t x0[16], y0[16], x1[16], y1[16];
        int64_t n0 = drain(tr, x0, y0, 16, &nb);
        CHECK(n0 == 16 && nb == 2, "train epoch 0: %lld ids in %lld batches", (long long)n0, (long long)nb);
        sn_dataset_reset(tr);
        int64_t n1 = drain(tr, x1, y1, 16, &nb);
        CHECK(n1 == 16, "train epoch 1: %lld ids", (long long)n1);
        /* y is x shifted by one in every element, whatever the order. */
        for (int i = 0; i < 16; i += 4)
            CHECK(y0[i] == x0[i] + 1 && y0[i + 3] == x0[i + 3] + 1, "y is not x shifted at %d", i);
        /* Each epoch is a permutation of the first four sequences. */
        qsort(x0, 4, 16, cmp_seq);
        qsort(x1, 4, 16, cmp_seq);
        for (int s = 0; s < 4; s++)
            CHECK(x0[s * 4] == s * 5 && x1[s * 4] == s * 5, "sorted sequence %d starts with %d/%d", s,
                  x0[s * 4], x1[s * 4]);
        int32_t xv[8], yv[8];
        int64_t nv = drain(va, xv, yv, 8, &nb);
        CHECK(nv == 4 && nb == 1 && xv[0] == 20 && yv[3] == 24, "validation: %lld ids, x0 %d", (long long)nv,
              xv[0]);
    }
    sn_dataset_free(tr);
    sn_dataset_free(va);
    sn_vocab_free(v);

    /* The same seed gives the same batches; another seed (almost surely) another order. */
    const char *lorem = "the quick brown fox jumps over the lazy dog, again and again and again. ";
    int32_t a[2][4000], ay[4000];
    for (int r = 0; r < 2; r++) {
        o.seq_length = 3;
        o.batch_size = 4;
        o.validation_split = 0;
        o.seed = 11;
        CHECK_OK(sn_text_dataset_from_memory(lorem, strlen(lorem), "lorem", &o, &v, &tr, NULL, NULL));
        if (tr) drain(tr, a[r], ay, 4000, &nb);
        sn_dataset_free(tr);
        sn_vocab_free(v);
    }
    CHECK(memcmp(a[0], a[1], (size_t)nb * 16 * 4) == 0, "same seed, different batches");

    /* A given vocabulary is used as it is (ids as in it); a character outside it is an error. */
    uint32_t chars[] = {'a', 'b', 'c', 'x'};
    sn_vocab *given = NULL;
    CHECK_OK(sn_vocab_from_chars(&given, chars, 4, false));
    o = sn_text_defaults();
    o.seq_length = 2;
    o.batch_size = 0;
    o.shuffle_buffer = 0;
    o.validation_split = 0;
    o.prefetch = 0;
    o.vocab = given;
    CHECK_OK(sn_text_dataset_from_memory("xcab", 4, "t", &o, &v, &tr, NULL, NULL));
    if (tr) {
        sn_tensor *b[2];
        bool end;
        CHECK_OK(sn_dataset_next(tr, b, &end));
        CHECK(((int32_t *)sn_tensor_data(b[0]))[0] == 3 && ((int32_t *)sn_tensor_data(b[1]))[1] == 0,
              "ids through the given vocabulary");
    }
    CHECK(v && v != given && sn_vocab_size(v) == 4, "the vocabulary handed back is a copy");
    sn_dataset_free(tr);
    sn_vocab_free(v);
    CHECK_ERR(sn_text_dataset_from_memory("abz", 3, "t.txt", &o, &v, &tr, NULL, NULL),
              SN_ERR_INVALID, "t.txt: vocab: character 'z' (U+007A) at byte offset 2 is not in");
    o.bytes = true;
    CHECK_ERR(sn_text_dataset_from_memory("abc", 3, "t.txt", &o, &v, &tr, NULL, NULL),
              SN_ERR_INVALID, "in UTF-8 mode but the text is read in bytes mode");
    sn_vocab_free(given);

    /* Files: invalid UTF-8 names the offset; bytes mode reads it; too short; options. */
    const char *bad = test_tmp("bad.txt");
    test_write_file(bad, "hello\nw\xc3\x28rld\n", 13);
    o = sn_text_defaults();
    o.seq_length = 3;
    o.batch_size = 1;
    o.validation_split = 0;
    CHECK_ERR(sn_text_dataset(bad, &o, &v, &tr, NULL, NULL), SN_ERR_FORMAT,
              "is not valid UTF-8: the sequence at byte offset 7 (bytes c3 28 72 6c)");
    CHECK(strstr(sn_last_error(), bad) != NULL, "message lacks the path: %s", sn_last_error());
    o.bytes = true;
    CHECK_OK(sn_text_dataset(bad, &o, &v, &tr, NULL, &info));
    CHECK(v && sn_vocab_is_bytes(v) && info.n_units == 13 && info.n_sequences == 3, "bytes mode: %lld units",
          (long long)info.n_units);
    sn_dataset_free(tr);
    sn_vocab_free(v);
    o.bytes = false;
    o.seq_length = 100;
    CHECK_ERR(sn_text_dataset_from_memory("short", 5, "s.txt", &o, &v, &tr, NULL, NULL), SN_ERR_INVALID,
              "s.txt has 5 characters, which make 0 sequences of 100 + 1");
    o.seq_length = 1;
    o.batch_size = 64;
    CHECK_ERR(sn_text_dataset_from_memory("abcdef", 6, "s.txt", &o, &v, &tr, NULL, NULL), SN_ERR_INVALID,
              "batch_size 64 is larger than the 3 elements");
    o.validation_split = 1.0;
    CHECK_ERR(sn_text_dataset_from_memory("abcdef", 6, "s.txt", &o, &v, &tr, NULL, NULL), SN_ERR_INVALID,
              "validation_split 1 is outside [0, 1)");
    CHECK_ERR(sn_text_dataset(test_tmp("nope.txt"), &o, &v, &tr, NULL, NULL), SN_ERR_IO, "cannot open");
}

int main(void) {
    if (!test_tmpdir_make("sn_test_text")) return 1;
    test_utf8();
    test_vocab();
    test_text_dataset();
    test_tmpdir_remove();
    return sn_test_finish("test_text");
}
