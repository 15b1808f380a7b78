/* Encoding one TensorBoard scalar Event: protobuf-c (what src/io/tb_events.c uses) against a
 * hand-written encoder of the same bytes, to decide between them (docs/dependencies.md).
 * Both produce identical bytes (checked before timing); rounds alternate between the two.
 *
 *     build/bench/bench_tb_encode [events per round, default 1000000] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "event.pb-c.h"

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    return n;
}

/* Event{wall_time, step, summary{value{tag, simple_value}}} with proto3's omission of zero
 * scalars, as protobuf-c writes it. Tags shorter than 128 bytes. */
static size_t hand_encode(uint8_t *p, double wall, int64_t step, const char *tag, float v) {
    size_t n = 0, tl = strlen(tag);
    if (wall != 0) {
        p[n++] = 0x09;
        memcpy(p + n, &wall, 8);
        n += 8;
    }
    if (step != 0) {
        p[n++] = 0x10;
        n += put_varint(p + n, (uint64_t)step);
    }
    size_t value_len = 2 + tl + 5;
    p[n++] = 0x2a;
    n += put_varint(p + n, 2 + value_len);
    p[n++] = 0x0a;
    n += put_varint(p + n, value_len);
    p[n++] = 0x0a;
    p[n++] = (uint8_t)tl;
    memcpy(p + n, tag, tl);
    n += tl;
    p[n++] = 0x15;
    memcpy(p + n, &v, 4);
    return n + 4;
}

static size_t pbc_encode(uint8_t *p, double wall, int64_t step, const char *tag, float v) {
    Tensorboard__Summary__Value val = TENSORBOARD__SUMMARY__VALUE__INIT;
    val.tag = (char *)tag;
    val.value_case = TENSORBOARD__SUMMARY__VALUE__VALUE_SIMPLE_VALUE;
    val.simple_value = v;
    Tensorboard__Summary__Value *vals[1] = {&val};
    Tensorboard__Summary sum = TENSORBOARD__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = vals;
    Tensorboard__Event ev = TENSORBOARD__EVENT__INIT;
    ev.wall_time = wall;
    ev.step = step;
    ev.what_case = TENSORBOARD__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    size_t len = tensorboard__event__get_packed_size(&ev);
    return tensorboard__event__pack(&ev, p) == len ? len : 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    uint8_t a[128], b[128];
    size_t la = pbc_encode(a, 1.7e9 + 0.25, 12345, "epoch_sparse_categorical_accuracy", 0.9f);
    size_t lb = hand_encode(b, 1.7e9 + 0.25, 12345, "epoch_sparse_categorical_accuracy", 0.9f);
    if (la != lb || memcmp(a, b, la) != 0) {
        fprintf(stderr, "bench_tb_encode: the encoders differ (%zu vs %zu bytes)\n", la, lb);
        return 1;
    }
    double best[2] = {1e30, 1e30};
    uint64_t sink = 0;
    for (int round = 0; round < 10; round++)
        for (int which = 0; which < 2; which++) {
            double t0 = sn_now();
            for (long i = 0; i < n; i++) {
                size_t len = which == 0 ? pbc_encode(a, 1.7e9 + (double)i, i, "epoch_loss", (float)i)
                                        : hand_encode(a, 1.7e9 + (double)i, i, "epoch_loss", (float)i);
                sink += a[len - 1];
            }
            double dt = (sn_now() - t0) / (double)n;
            if (dt < best[which]) best[which] = dt;
        }
    printf("bytes=%zu protobuf_c_ns=%.1f hand_ns=%.1f (best of 10 alternating rounds of %ld; "
           "sink %llu)\n", la, best[0] * 1e9, best[1] * 1e9, n, (unsigned long long)(sink & 1));
    return 0;
}
