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
int sn_cmd_bench(int argc, char **argv);
int sn_cmd_plot(int argc, char **argv);

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
/* Preset `preset` built for images like `images` (u8 [n, rows, cols]; NULL: 28x28) with one
 * channel. The caller frees *out. */
sn_status sn_cli_build_model(const char *preset, const sn_tensor *images, uint64_t seed,
                             sn_model **out);
/* For the commands that run saved weights (evaluate, predict): the preset built as above
 * (seed 0), compiled with the defaults and loaded from `weights`. The caller frees *out; on
 * an error nothing is left to free. */
sn_status sn_cli_load_model(const char *preset, const sn_tensor *images, const char *weights,
                            sn_model **out);
/* Their flags --model, --weights (required), --dataset and --data-dir, as entries of an
 * sn_flag array; the arguments are the addresses of the caller's const char * variables. */
#define SN_CLI_WEIGHTS_FLAGS(model, weights, dataset, data_dir)                                \
    {.name = "model", .kind = SN_FLAG_ENUM, .value = (model), .choices = sn_cli_models,        \
     .help = "model preset the weights belong to"},                                            \
    {.name = "weights", .kind = SN_FLAG_STRING, .value = (weights), .metavar = "PATH",         \
     .required = true,                                                                         \
     .help = "weights file (.weights.h5 from sinter train --save, or Keras .h5)"},             \
    {.name = "dataset", .kind = SN_FLAG_ENUM, .value = (dataset), .choices = sn_cli_datasets,  \
     .help = "data set installed on this machine"},                                            \
    {.name = "data-dir", .kind = SN_FLAG_STRING, .value = (data_dir), .metavar = "DIR",        \
     .help = "folder with the four MNIST-layout IDX files (overrides --dataset)"}

/* ---- pictures of a model's mistakes (eval_plots.c) ------------------------------------- */
/* Class names of --dataset fashion_mnist (T-shirt/top, ...) or, for --data-dir, digits 0-9. */
const char *const *sn_cli_class_names(const char *dataset, const char *data_dir);
typedef struct sn_cli_eval_plot_opts {
    const char *misclassified; /* PNG path or NULL */
    int64_t max_images;        /* >= 1 */
    const char *confusion;     /* PNG path or NULL */
} sn_cli_eval_plot_opts;
/* Predicts every test image (test: the unshuffled pipeline over x, y: u8 [n, rows, cols] and
 * [n]), prints "Misclassified: W/N" and writes the requested PNGs. Returns the exit code. */
int sn_cli_eval_plots(const char *prog, sn_model *m, sn_dataset *test, const sn_tensor *x,
                      const sn_tensor *y, const char *const *names,
                      const sn_cli_eval_plot_opts *o);

#endif
