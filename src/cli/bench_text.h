/* sinter bench for the character models (bench_text.c): the text as ids, a feed that cuts
 * batches of windows from it the way ../shared/bench/char_lstm.py does, and the FLOP count
 * that script uses. */
#ifndef SN_CLI_BENCH_TEXT_H
#define SN_CLI_BENCH_TEXT_H

#include <stdint.h>

#include "sinter/graph.h"
#include "sinter/nn.h"

typedef struct sn_bench_text {
    int32_t *ids; /* the whole text as vocabulary ids, owned (sn_bench_text_free) */
    int64_t n;
    int vocab;
    int64_t batch, seq;
    uint64_t seed;
    sn_node xin, yin; /* the training plan's inputs [batch, seq] (f32 ids, i32 targets) */
} sn_bench_text;

/* Reads `path` (UTF-8 text) and encodes it with its own sorted vocabulary. On an error
 * (unreadable file, invalid UTF-8, a text shorter than seq + 2) returns it with a message
 * naming the file; nothing is left to free. */
sn_status sn_bench_text_load(const char *path, int64_t batch, int64_t seq, uint64_t seed,
                             sn_bench_text *t);
void sn_bench_text_free(sn_bench_text *t);
/* sn_plan_run's feed: row b of plan step s is the window of seq + 1 ids starting at a
 * position drawn by Philox from (seed, s, b), as char_lstm.py draws random starts. */
sn_status sn_bench_text_feed(void *ctx, sn_plan *p, int64_t step);
/* Training FLOPs per token as char_lstm.py counts them: 3 x forward, forward = 2 x the
 * multiply-adds of the LSTM's kernel and recurrent kernel and of the Dense layer (the
 * Embedding's gather counts nothing; char_lstm.py's one-hot input counts V x 4U). */
double sn_bench_text_flops_per_token(sn_model *m);

#endif
