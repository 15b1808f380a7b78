/* TensorBoard event files: tensorboard.Event messages encoded by protobuf-c (the generated
 * event.pb-c.c / summary.pb-c.c from third_party/tensorboard), framed by src/data's TFRecord
 * writer. docs/dependencies.md says why protobuf-c rather than a hand encoder. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/core.h"
#include "event.pb-c.h"
#include "sinter/data.h"
#include "sinter/events.h"

#define SN_TB_DEFAULT_BUCKETS 30

struct sn_event_writer {
    sn_tfrecord_writer *rec;
    char *path;
};

/* Distinguishes the files of writers opened within the same second by this process. */
static atomic_uint writer_count;

static double wall_time(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* mkdir -p: creates each missing component of dir. */
static sn_status make_dirs(const char *dir) {
    size_t n = strlen(dir);
    char *p = sn_malloc(n + 1);
    if (!p) return SN_ERR_NOMEM;
    memcpy(p, dir, n + 1);
    sn_status s = SN_OK;
    for (size_t i = 1; i <= n && s == SN_OK; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        struct stat st;
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            s = sn_errorf(SN_ERR_IO, "event file: cannot create the folder '%s': %s", p,
                          strerror(errno));
        else if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
            s = sn_errorf(SN_ERR_IO, "event file: '%s' exists and is not a folder", p);
        p[i] = c;
    }
    free(p);
    return s;
}

/* Serializes ev with protobuf-c and writes it as one record. */
static sn_status write_event(sn_event_writer *w, const Tensorboard__Event *ev) {
    size_t len = tensorboard__event__get_packed_size(ev);
    uint8_t *buf = sn_malloc(len ? len : 1);
    if (!buf) return SN_ERR_NOMEM;
    size_t got = tensorboard__event__pack(ev, buf);
    SN_ASSERT(got == len);
    sn_status s = sn_tfrecord_write(w->rec, buf, len);
    free(buf);
    return s;
}

sn_status sn_event_writer_open(const char *dir, sn_event_writer **out) {
    if (!out || !dir || !*dir)
        return sn_errorf(SN_ERR_INVALID, "sn_event_writer_open: %s",
                         !out ? "out is NULL" : "the folder name is empty or NULL");
    *out = NULL;
    SN_TRY(make_dirs(dir));
    char host[HOST_NAME_MAX + 1] = "localhost";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    double now = wall_time();
    unsigned n = atomic_fetch_add(&writer_count, 1u);
    int len = snprintf(NULL, 0, "%s/events.out.tfevents.%lld.%s.%ld.%u", dir, (long long)now,
                       host, (long)getpid(), n);
    sn_event_writer *w = sn_calloc(1, sizeof *w);
    if (!w || !(w->path = sn_malloc((size_t)len + 1))) {
        free(w);
        return SN_ERR_NOMEM;
    }
    snprintf(w->path, (size_t)len + 1, "%s/events.out.tfevents.%lld.%s.%ld.%u", dir,
             (long long)now, host, (long)getpid(), n);
    sn_status s = sn_tfrecord_writer_open(&w->rec, w->path, false);
    if (s == SN_OK) {
        /* TensorBoard identifies event files by this first record. */
        Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
        ev.wall_time = now;
        ev.what_case = TENSORBOARD__EVENT__WHAT_FILE_VERSION;
        ev.file_version = (char *)"brain.Event:2";
        s = write_event(w, &ev);
        if (s == SN_OK) s = sn_tfrecord_writer_flush(w->rec);
    }
    if (s != SN_OK) {
        /* The close fails too on a full disk: its message must not replace the first. */
        char why[1024];
        snprintf(why, sizeof why, "%s", sn_last_error());
        sn_tfrecord_writer_close(w->rec);
        free(w->path);
        free(w);
        if (s == SN_ERR_IO) return sn_errorf(s, "%s", why); /* it names the file */
        return sn_errorf(s, "opening a TensorBoard event file in '%s': %s", dir, why);
    }
    *out = w;
    return SN_OK;
}

const char *sn_event_writer_path(const sn_event_writer *w) { return w ? w->path : NULL; }

/* Wraps one Summary.Value into an Event at step and writes it. */
static sn_status write_value(sn_event_writer *w, int64_t step, Tensorboard__Summary__Value *v) {
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    Tensorboard__Summary__Value *vals[1] = {v};
    sum.n_value = 1;
    sum.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall_time();
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    return write_event(w, &ev);
}

static sn_status check_tag(const sn_event_writer *w, const char *tag, const char *what) {
    if (!w) return sn_errorf(SN_ERR_INVALID, "%s: writer is NULL", what);
    if (!tag || !*tag) return sn_errorf(SN_ERR_INVALID, "%s: the tag is empty or NULL", what);
    return SN_OK;
}

sn_status sn_event_write_scalar(sn_event_writer *w, const char *tag, int64_t step, double value) {
    SN_TRY(check_tag(w, tag, "sn_event_write_scalar"));
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    v.simple_value = (float)value;
    sn_status s = write_value(w, step, &v);
    if (s != SN_OK)
        return sn_error_context(s, "writing scalar '%s' at step %lld", tag, (long long)step);
    return SN_OK;
}

sn_status sn_event_write_histogram(sn_event_writer *w, const char *tag, int64_t step,
                                   const float *values, int64_t n, int buckets) {
    SN_TRY(check_tag(w, tag, "sn_event_write_histogram"));
    if (!values || n < 1 || buckets < 0)
        return sn_errorf(SN_ERR_INVALID, "histogram '%s': %s", tag,
                         !values ? "values is NULL"
                         : n < 1 ? "no values (n must be >= 1)"
                                 : "buckets must be >= 0 (0: 30)");
    if (buckets == 0) buckets = SN_TB_DEFAULT_BUCKETS;
    double lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = values[i];
        if (!isfinite(x))
            return sn_errorf(SN_ERR_NUMERIC, "histogram '%s': value %lld is %g; expected finite "
                             "values", tag, (long long)i, x);
        lo = x < lo ? x : lo;
        hi = x > hi ? x : hi;
        sum += x;
        sq += x * x;
    }
    /* All equal: one bucket (TensorBoard draws it around the value). */
    int nb = hi > lo ? buckets : 1;
    double *limit = sn_calloc((size_t)nb, sizeof *limit), *count = sn_calloc((size_t)nb, sizeof *count);
    if (!limit || !count) {
        free(limit);
        free(count);
        return SN_ERR_NOMEM;
    }
    double width = (hi - lo) / nb;
    /* bucket i holds [limit[i-1], limit[i]); the last one also holds max itself */
    for (int b = 0; b < nb; b++) limit[b] = b == nb - 1 ? hi : lo + width * (b + 1);
    for (int64_t i = 0; i < n; i++) {
        int b = nb == 1 ? 0 : (int)((values[i] - lo) / width);
        if (b >= nb) b = nb - 1;
        if (b < 0) b = 0;
        /* floating rounding at an edge: keep the bucket consistent with the limits */
        while (b > 0 && values[i] < limit[b - 1]) b--;
        while (b < nb - 1 && values[i] >= limit[b]) b++;
        count[b] += 1;
    }
    Tensorboard__HistogramProto h = TENSORBOARD__HISTOGRAM_PROTO__INIT;
    h.min = lo;
    h.max = hi;
    h.num = (double)n;
    h.sum = sum;
    h.sum_squares = sq;
    h.n_bucket_limit = h.n_bucket = (size_t)nb;
    h.bucket_limit = limit;
    h.bucket = count;
    Tensorboard__Summary__Value v = TENSORBOARD__SUMMARY__VALUE__INIT;
    v.tag = (char *)tag;
    v.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_HISTO;
    v.histo = &h;
    sn_status s = write_value(w, step, &v);
    free(limit);
    free(count);
    if (s != SN_OK)
        return sn_error_context(s, "writing histogram '%s' at step %lld", tag, (long long)step);
    return SN_OK;
}

sn_status sn_event_writer_flush(sn_event_writer *w) {
    if (!w) return sn_errorf(SN_ERR_INVALID, "sn_event_writer_flush: writer is NULL");
    return sn_tfrecord_writer_flush(w->rec);
}

sn_status sn_event_writer_close(sn_event_writer *w) {
    if (!w) return SN_OK;
    sn_status s = sn_tfrecord_writer_close(w->rec);
    free(w->path);
    free(w);
    return s;
}
