/* Internal to the sinter command. */
#ifndef SN_CLI_H
#define SN_CLI_H

typedef struct sn_cli_command {
    const char *name, *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name; returns the exit code */
} sn_cli_command;

int sn_cmd_devices(int argc, char **argv);
int sn_cmd_train(int argc, char **argv);
int sn_cmd_evaluate(int argc, char **argv);
int sn_cmd_predict(int argc, char **argv);
int sn_cmd_summary(int argc, char **argv);
int sn_cmd_export(int argc, char **argv);
int sn_cmd_bench(int argc, char **argv);

/* ---- shared by train, evaluate, predict and summary (data_setup.c) ---------------------- */
#include <stdbool.h>
#include <stdint.h>

#include "sinter/data.h"
#include "sinter/nn.h"

/* NULL-terminated names for --dataset and --model. */
extern const char *const sn_cli_datasets[];
extern const char *const sn_cli_models[];
/* Loads split "train" or "test" of --dataset (data_dir NULL) or of --data-dir: images u8
 * [n, rows, cols], labels u8 [n], which the caller frees. Prints the error (with how to get
 * the data when it is not installed) and returns 1; returns 0 on success. */
int sn_cli_load_split(const char *prog, const char *dataset, const char *data_dir,
                      const char *split, sn_tensor **x, sn_tensor **y);
/* The input pipeline over copies of x and y: the first `take` elements (-1: all), a seeded
 * shuffle (reshuffled each epoch) when `shuffle`, images to f32 [rows, cols, 1] in [0, 1],
 * labels to i32, batches, prefetch. The caller frees *out. */
sn_status sn_cli_pipeline(sn_tensor *x, sn_tensor *y, int64_t take, int64_t batch, bool shuffle,
                          uint64_t seed, bool drop_remainder, sn_dataset **out);
/* --model: a preset name, or a Keras model file (.keras archive or model JSON). */
bool sn_cli_model_is_preset(const char *name);
/* The model `name` for images like `images` (u8 [n, rows, cols]; NULL: 28x28, no check) with
 * one channel: a preset is built for them from `seed`; a model file is loaded (its weights
 * too, for .keras; JSON models are initialised from `seed`) and its input shape must be
 * (rows, cols, 1). info (may be NULL) receives what the file held. The caller frees *out. */
sn_status sn_cli_open_model(const char *name, const sn_tensor *images, uint64_t seed,
                            sn_model **out, sn_model_file_info *info);
/* The same without info (presets and files alike). */
sn_status sn_cli_build_model(const char *preset, const sn_tensor *images, uint64_t seed,
                             sn_model **out);
/* For the commands that run saved weights (evaluate, predict, serve): the model opened as
 * above (seed 0), compiled with the file's compile settings (defaults for presets) and
 * loaded from `weights`, which only a .keras file may go without. The caller frees *out; on
 * an error nothing is left to free. */
sn_status sn_cli_load_model(const char *preset, const sn_tensor *images, const char *weights,
                            sn_model **out);
#define SN_CLI_MODEL_HELP "model preset (tpu_guide_cnn, small_cnn, mlp) or Keras model file (.keras, .json)"
/* Their flags --model, --weights, --dataset and --data-dir, as entries of an
 * sn_flag array; the arguments are the addresses of the caller's const char * variables. */
#define SN_CLI_WEIGHTS_FLAGS(model, weights, dataset, data_dir)                                \
    {.name = "model", .kind = SN_FLAG_STRING, .value = (model), .metavar = "NAME|PATH",       \
     .help = SN_CLI_MODEL_HELP},                                                               \
    {.name = "weights", .kind = SN_FLAG_STRING, .value = (weights), .metavar = "PATH",         \
     .help = "weights file (.weights.h5 from sinter train --save, or Keras .h5); required "    \
             "unless --model is a .keras file"},                                              \
    {.name = "dataset", .kind = SN_FLAG_ENUM, .value = (dataset), .choices = sn_cli_datasets,  \
     .help = "data set installed on this machine"},                                            \
    {.name = "data-dir", .kind = SN_FLAG_STRING, .value = (data_dir), .metavar = "DIR",        \
     .help = "folder with the four MNIST-layout IDX files (overrides --dataset)"}

#endif
