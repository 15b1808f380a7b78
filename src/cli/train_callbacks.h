/* Internal to sinter train: the flags of the Keras callbacks ModelCheckpoint,
 * ReduceLROnPlateau and the learning-rate schedules, and the callbacks made from them
 * (train_callbacks.c). */
#ifndef SN_CLI_TRAIN_CALLBACKS_H
#define SN_CLI_TRAIN_CALLBACKS_H

#include <stdbool.h>
#include <stdint.h>

#include "cli/flags.h"
#include "sinter/nn.h"

typedef struct sn_cli_cb_flags {
    const char *mc_path, *mc_monitor, *mc_mode;
    bool mc_best_only, mc_weights_only;
    int64_t rl_patience; /* -1: no ReduceLROnPlateau */
    const char *rl_monitor;
    double rl_factor, rl_min_lr, rl_min_delta;
    int64_t rl_cooldown;
    const char *sched, *boundaries, *values;
    int64_t decay_steps, warmup_steps;
    double decay_rate, alpha, warmup_target;
    bool staircase;
} sn_cli_cb_flags;

sn_cli_cb_flags sn_cli_cb_defaults(void);

extern const char *const sn_cli_cb_modes[];
extern const char *const sn_cli_cb_schedules[];

#define SN_CLI_CALLBACK_FLAGS(v)                                                               \
    {.name = "model-checkpoint", .kind = SN_FLAG_STRING, .value = &(v)->mc_path,               \
     .metavar = "PATTERN", .help = "ModelCheckpoint: save at each epoch's end to PATTERN, "    \
     "e.g. 'ckpt/m-{epoch:02d}-{val_loss:.2f}.h5' (a full checkpoint; .weights.h5 with "       \
     "--save-weights-only)"},                                                                  \
    {.name = "monitor", .kind = SN_FLAG_STRING, .value = &(v)->mc_monitor, .metavar = "NAME",  \
     .help = "ModelCheckpoint's monitor (with --save-best-only)"},                             \
    {.name = "save-best-only", .kind = SN_FLAG_BOOL, .value = &(v)->mc_best_only,              \
     .help = "ModelCheckpoint: save only when --monitor improved"},                            \
    {.name = "save-weights-only", .kind = SN_FLAG_BOOL, .value = &(v)->mc_weights_only,        \
     .help = "ModelCheckpoint: Keras 3 .weights.h5 instead of the whole training state"},      \
    {.name = "checkpoint-mode", .kind = SN_FLAG_ENUM, .value = &(v)->mc_mode,                  \
     .choices = sn_cli_cb_modes, .help = "ModelCheckpoint: is a larger --monitor better (max)"},\
    {.name = "reduce-lr-patience", .kind = SN_FLAG_INT, .value = &(v)->rl_patience, .imin = 0,\
     .imax = 1000000, .default_text = "off",                                                  \
     .help = "ReduceLROnPlateau: reduce after N epochs without improvement"},                  \
    {.name = "reduce-lr-monitor", .kind = SN_FLAG_STRING, .value = &(v)->rl_monitor,           \
     .metavar = "NAME", .help = "ReduceLROnPlateau's monitor"},                                \
    {.name = "reduce-lr-factor", .kind = SN_FLAG_FLOAT, .value = &(v)->rl_factor, .fmin = 0,   \
     .fmax = 1, .fmin_exclusive = true, .help = "ReduceLROnPlateau: new rate = rate * F"},     \
    {.name = "reduce-lr-min-delta", .kind = SN_FLAG_FLOAT, .value = &(v)->rl_min_delta,        \
     .fmin = 0, .fmax = 1e30, .help = "ReduceLROnPlateau: smallest change that counts"},       \
    {.name = "reduce-lr-cooldown", .kind = SN_FLAG_INT, .value = &(v)->rl_cooldown, .imin = 0, \
     .imax = 1000000, .help = "ReduceLROnPlateau: epochs of rest after a reduction"},          \
    {.name = "reduce-lr-min-lr", .kind = SN_FLAG_FLOAT, .value = &(v)->rl_min_lr, .fmin = 0,   \
     .fmax = 10, .help = "ReduceLROnPlateau: the lowest rate"},                                \
    {.name = "lr-schedule", .kind = SN_FLAG_ENUM, .value = &(v)->sched,                        \
     .choices = sn_cli_cb_schedules, .help = "keras.optimizers.schedules from "                \
     "--learning-rate: ExponentialDecay, PiecewiseConstantDecay, CosineDecay"},                \
    {.name = "lr-decay-steps", .kind = SN_FLAG_INT, .value = &(v)->decay_steps, .imin = 1,     \
     .imax = INT64_MAX, .help = "exponential, cosine: decay_steps"},                           \
    {.name = "lr-decay-rate", .kind = SN_FLAG_FLOAT, .value = &(v)->decay_rate, .fmin = 0,     \
     .fmax = 1e30, .fmin_exclusive = true, .help = "exponential: decay_rate"},                 \
    {.name = "lr-staircase", .kind = SN_FLAG_BOOL, .value = &(v)->staircase,                   \
     .help = "exponential: decay in whole steps of decay_steps"},                              \
    {.name = "lr-boundaries", .kind = SN_FLAG_STRING, .value = &(v)->boundaries,               \
     .metavar = "S1,S2,...", .help = "piecewise: step boundaries"},                            \
    {.name = "lr-values", .kind = SN_FLAG_STRING, .value = &(v)->values,                       \
     .metavar = "R0,R1,...", .help = "piecewise: one more rate than boundaries"},              \
    {.name = "lr-alpha", .kind = SN_FLAG_FLOAT, .value = &(v)->alpha, .fmin = 0, .fmax = 1,    \
     .help = "cosine: the final rate as a fraction"},                                          \
    {.name = "lr-warmup-steps", .kind = SN_FLAG_INT, .value = &(v)->warmup_steps, .imin = 0,   \
     .imax = INT64_MAX, .help = "cosine: linear warmup steps (to --lr-warmup-target)"},        \
    {.name = "lr-warmup-target", .kind = SN_FLAG_FLOAT, .value = &(v)->warmup_target,          \
     .fmin = 0, .fmax = 10, .help = "cosine: the rate the warmup reaches"}

/* Appends the callbacks the flags ask for to cbs[*n] (at most cap in all); lr is the
 * optimizer's initial rate (the schedules start from it). Prints the error and returns 1 or
 * 2 (usage); 0 on success. The caller frees the callbacks. */
int sn_cli_make_callbacks(const char *prog, const sn_cli_cb_flags *v, double lr,
                          sn_callback **cbs, int *n, int cap);

#endif
