/* TensorBoard event files without TensorBoard: the CRC-32C and TFRecord framing, the Event
 * wire encoding of the vendored .proto (against bytes worked out by hand from the protobuf
 * spec), what sn_event_writer writes (read back with src/data's reader, which checks both
 * CRCs, and decoded with protobuf-c), a corrupt byte caught, and the TensorBoard callback's
 * tags, steps and folders under synthetic logs. tests/test_tensorboard.sh reads real
 * training logs with TensorBoard's own reader. */
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event.pb-c.h"
#include "sinter/data.h"
#include "sinter/events.h"
#include "sinter/nn.h"
#include "sn_test.h"

/* Every record of path, unpacked; returns how many (at most cap). */
static int read_events(const char *path, Tensorboard__Event **ev, int cap) {
    sn_tfrecord_reader *r;
    sn_status s = sn_tfrecord_open(&r, path);
    CHECK(s == SN_OK, "open %s: %s", path, sn_last_error());
    if (s != SN_OK) return 0;
    int n = 0;
    for (;;) {
        const uint8_t *d;
        size_t len;
        bool end = false;
        s = sn_tfrecord_read(r, &d, &len, &end);
        CHECK(s == SN_OK, "read %s record %d: %s", path, n, sn_last_error());
        if (s != SN_OK || end || n == cap) break;
        ev[n] = tensorboard__event__unpack(NULL, len, d);
        CHECK(ev[n] != NULL, "record %d of %s is not an Event", n, path);
        if (!ev[n]) break;
        n++;
    }
    sn_tfrecord_close(r);
    return n;
}

static void free_events(Tensorboard__Event **ev, int n) {
    for (int i = 0; i < n; i++) tensorboard__event__free_unpacked(ev[i], NULL);
}

static void test_crc(void) {
    /* The CRC-32C check value of RFC 3720 / iSCSI: "123456789" -> 0xE3069283. */
    CHECK(sn_crc32c(0, "123456789", 9) == 0xE3069283u, "crc32c = %08x",
          sn_crc32c(0, "123456789", 9));
    /* TFRecord's mask: rotate right by 15 and add 0xa282ead8. */
    uint32_t c = 0xE3069283u, want = ((c >> 15) | (c << 17)) + 0xa282ead8u;
    CHECK(sn_crc32c_masked("123456789", 9) == want, "masked %08x want %08x",
          sn_crc32c_masked("123456789", 9), want);
}

static void test_wire_bytes(void) {
    /* Event{wall_time: 1.5, step: 3, summary{value{tag: "a", simple_value: 2}}} */
    static const uint8_t want[] = {
        0x09, 0, 0, 0, 0, 0, 0, 0xf8, 0x3f, /* 1: double 1.5 */
        0x10, 0x03,                         /* 2: varint 3 */
        0x2a, 0x0a,                         /* 5: Summary, 10 bytes */
        0x0a, 0x08,                         /*   1: Value, 8 bytes */
        0x0a, 0x01, 'a',                    /*     1: tag "a" */
        0x15, 0, 0, 0, 0x40};               /*     2: float 2.0 */
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)"a";
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = 2.0f;
    Tensorboard__Summary__Value *vals[1] = {&v};
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = 1.5;
    ev.step = 3;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    uint8_t buf[64];
    size_t n = tensorboard__event__get_packed_size(&ev);
    CHECK(n == sizeof want, "packed size %zu, want %zu", n, sizeof want);
    if (n == sizeof want) {
        tensorboard__event__pack(&ev, buf);
        CHECK(memcmp(buf, want, n) == 0, "Event bytes differ from the hand-worked encoding");
    }
}

static void test_writer(const char *dir) {
    sn_event_writer *w;
    CHECK_OK(sn_event_writer_open(dir, &w));
    const char *path = sn_event_writer_path(w);
    CHECK(path && strstr(path, "/events.out.tfevents.") != NULL, "path %s", path);
    CHECK_OK(sn_event_write_scalar(w, "epoch_loss", 0, 0.75));
    CHECK_OK(sn_event_write_scalar(w, "epoch_loss", 1, 0.5));
    float h[] = {-1, 0, 0, 0.5f, 1, 1, 1, 3};
    CHECK_OK(sn_event_write_histogram(w, "dense/kernel/histogram", 1, h, 8, 4));
    CHECK_OK(sn_event_write_histogram(w, "same", 2, h + 4, 3, 0));
    CHECK_ERR(sn_event_write_histogram(w, "nan", 2, (float[]){NAN}, 1, 0), SN_ERR_NUMERIC, "finite");
    CHECK_ERR(sn_event_write_scalar(w, "", 0, 1), SN_ERR_INVALID, "tag");
    CHECK_OK(sn_event_writer_flush(w));
    /* Flushed records are visible to a reader of the still open file (TensorBoard's case). */
    Tensorboard__Event *ev[16];
    int n = read_events(path, ev, 16);
    CHECK(n == 5, "%d records in the open file, want 5", n);
    free_events(ev, n);
    char *keep = strdup(path);
    CHECK_OK(sn_event_writer_close(w));

    n = read_events(keep, ev, 16);
    CHECK(n == 5, "%d records, want 5 (file_version, 2 scalars, 2 histograms)", n);
    if (n == 5) {
        CHECK(ev[0]->what_case == TENSORBOARD__EVENT__WHAT_FILE_VERSION &&
                  !strcmp(ev[0]->file_version, "brain.Event:2"),
              "first record is not file_version brain.Event:2");
        CHECK(ev[0]->wall_time > 1.6e9, "wall_time %f", ev[0]->wall_time);
        for (int i = 1; i <= 2; i++) {
            CHECK(ev[i]->what_case == TENSORBOARD__EVENT__WHAT_SUMMARY && ev[i]->summary->n_value == 1,
                  "record %d is not a one-value summary", i);
            Tensorboard__Summary__Value *v = ev[i]->summary->value[0];
            CHECK(!strcmp(v->tag, "epoch_loss") && ev[i]->step == i - 1 &&
                      v->value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE &&
                      v->simple_value == (i == 1 ? 0.75f : 0.5f),
                  "record %d: tag %s step %lld value %g", i, v->tag, (long long)ev[i]->step,
                  v->simple_value);
        }
        Tensorboard__Summary__Value *v = ev[3]->summary->value[0];
        CHECK(v->value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO, "record 3 is no histogram");
        if (v->value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO) {
            Tensorboard__HistogramProto *hp = v->histo;
            CHECK(hp->min == -1 && hp->max == 3 && hp->num == 8 && hp->sum == 5.5 &&
                      hp->sum_squares == 13.25,
                  "min %g max %g num %g sum %g sq %g", hp->min, hp->max, hp->num, hp->sum,
                  hp->sum_squares);
            /* 4 buckets of width 1 over [-1, 3]: [-1,0) 1, [0,1) 3, [1,2) 3, [2,3] 1 */
            double lim[] = {0, 1, 2, 3}, cnt[] = {1, 3, 3, 1};
            CHECK(hp->n_bucket == 4 && hp->n_bucket_limit == 4, "%zu buckets", hp->n_bucket);
            for (size_t b = 0; b < hp->n_bucket && b < 4; b++)
                CHECK(hp->bucket_limit[b] == lim[b] && hp->bucket[b] == cnt[b],
                      "bucket %zu: limit %g count %g", b, hp->bucket_limit[b], hp->bucket[b]);
        }
        v = ev[4]->summary->value[0];
        CHECK(v->value_case == TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO && v->histo->n_bucket == 1 &&
                  v->histo->bucket[0] == 3 && v->histo->bucket_limit[0] == 1,
              "a histogram of equal values is one bucket holding all of them");
    }
    free_events(ev, n);

    /* One flipped byte in the data of record 1: the reader names the record. */
    FILE *f = fopen(keep, "r+b");
    CHECK(f != NULL, "reopen %s", keep);
    if (f) {
        /* record 0: 12-byte header, data, 4-byte CRC; flip a byte inside record 1's data */
        uint8_t hdr[8];
        CHECK(fread(hdr, 1, 8, f) == 8, "read header");
        uint64_t len0 = 0;
        for (int i = 7; i >= 0; i--) len0 = len0 << 8 | hdr[i];
        long off = (long)(12 + len0 + 4 + 12 + 2);
        int c;
        fseek(f, off, SEEK_SET);
        c = fgetc(f);
        fseek(f, off, SEEK_SET);
        fputc(c ^ 0x40, f);
        fclose(f);
        sn_tfrecord_reader *r;
        CHECK_OK(sn_tfrecord_open(&r, keep));
        const uint8_t *d;
        size_t len;
        bool end;
        CHECK_OK(sn_tfrecord_read(r, &d, &len, &end));
        CHECK_ERR(sn_tfrecord_read(r, &d, &len, &end), SN_ERR_FORMAT, "record 1: corrupt data");
        sn_tfrecord_close(r);
    }
    free(keep);
}

/* The only file in dir whose name holds "tfevents" (NULL when none or several). */
static char *find_event_file(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return NULL;
    char *found = NULL;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strstr(e->d_name, "tfevents")) continue;
        n++;
        free(found);
        found = malloc(strlen(dir) + strlen(e->d_name) + 2);
        sprintf(found, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n != 1) {
        free(found);
        return NULL;
    }
    return found;
}

static void test_callback(const char *root) {
    sn_tensorboard_opts o = sn_tensorboard_defaults();
    CHECK(sn_callback_tensorboard(&o) == NULL && strstr(sn_last_error(), "log_dir"),
          "a callback without log_dir: %s", sn_last_error());
    o.log_dir = root;
    o.update_freq = 3;
    sn_callback *cb = sn_callback_tensorboard(&o);
    CHECK(cb != NULL, "sn_callback_tensorboard: %s", sn_last_error());
    if (!cb) return;
    bool stop = false;
    /* two epochs of 4 steps, batch callbacks after steps 2 and 4 (2 steps per execution) */
    for (int e = 0; e < 2; e++) {
        CHECK_OK(cb->on_epoch_begin(cb->user, e, 2));
        for (int s = 2; s <= 4; s += 2) {
            sn_logs l = {.epoch = e, .step = s, .steps = 4, .n = 2,
                         .names = {"loss", "sparse_categorical_accuracy"},
                         .values = {1.0 / (e * 4 + s), 0.1 * (e * 4 + s)}};
            CHECK_OK(cb->on_batch_end(cb->user, &l, &stop));
        }
        sn_logs l = {.epoch = e, .step = 4, .steps = 4, .n = 4,
                     .names = {"loss", "sparse_categorical_accuracy", "val_loss",
                               "val_sparse_categorical_accuracy"},
                     .values = {10.0 + e, 20.0 + e, 30.0 + e, 40.0 + e}};
        CHECK_OK(cb->on_epoch_end(cb->user, &l, &stop));
    }
    cb->on_train_end(cb->user);
    sn_callback_free(cb);

    char dir[5000];
    snprintf(dir, sizeof dir, "%s/train", root);
    char *train = find_event_file(dir);
    snprintf(dir, sizeof dir, "%s/validation", root);
    char *val = find_event_file(dir);
    CHECK(train && val, "one event file in each of train/ and validation/");
    Tensorboard__Event *ev[64];
    if (train) {
        int n = read_events(train, ev, 64);
        /* batch scalars when the global step passes 3 and 6: at steps 4 and 6; then per epoch
         * loss and accuracy (no learning rate without a model) */
        struct { const char *tag; int64_t step; float v; } want[] = {
            {"batch_loss", 4, 0.25f}, {"batch_sparse_categorical_accuracy", 4, 0.4f},
            {"epoch_loss", 0, 10}, {"epoch_sparse_categorical_accuracy", 0, 20},
            {"batch_loss", 6, 1.0f / 6}, {"batch_sparse_categorical_accuracy", 6, 0.6f},
            {"epoch_loss", 1, 11}, {"epoch_sparse_categorical_accuracy", 1, 21}};
        int nw = (int)(sizeof want / sizeof want[0]);
        CHECK(n == nw + 1, "train: %d records, want %d", n, nw + 1);
        for (int i = 0; i + 1 < n && i < nw; i++) {
            Tensorboard__Summary__Value *v = ev[i + 1]->summary->value[0];
            CHECK(!strcmp(v->tag, want[i].tag) && ev[i + 1]->step == want[i].step &&
                      v->simple_value == want[i].v,
                  "train record %d: %s step %lld value %g; want %s step %lld value %g", i + 1,
                  v->tag, (long long)ev[i + 1]->step, v->simple_value, want[i].tag,
                  (long long)want[i].step, want[i].v);
        }
        free_events(ev, n);
    }
    if (val) {
        int n = read_events(val, ev, 64);
        CHECK(n == 5, "validation: %d records, want 5", n);
        for (int i = 1; i < n; i++) {
            Tensorboard__Summary__Value *v = ev[i]->summary->value[0];
            int e = (i - 1) / 2;
            bool loss = (i - 1) % 2 == 0;
            CHECK(!strcmp(v->tag, loss ? "epoch_loss" : "epoch_sparse_categorical_accuracy") &&
                      ev[i]->step == e && v->simple_value == (loss ? 30 : 40) + e,
                  "validation record %d: %s step %lld value %g", i, v->tag,
                  (long long)ev[i]->step, v->simple_value);
        }
        free_events(ev, n);
    }
    free(train);
    free(val);
}

int main(void) {
    char root[] = "/tmp/sn_tb_XXXXXX";
    if (!mkdtemp(root)) {
        perror("mkdtemp");
        return 1;
    }
    char dir[256];
    test_crc();
    test_wire_bytes();
    snprintf(dir, sizeof dir, "%s/a/b", root); /* parents created too */
    test_writer(dir);
    snprintf(dir, sizeof dir, "%s/fit", root);
    test_callback(dir);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
    return sn_test_finish("test_tb_events");
}
