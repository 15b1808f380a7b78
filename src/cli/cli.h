/* Internal to the sinter command. */
#ifndef SN_CLI_H
#define SN_CLI_H

typedef struct sn_cli_command {
    const char *name, *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name; returns the exit code */
} sn_cli_command;

#include <stdbool.h>

/* The whole command line: argv[1] names the command. Returns the exit code (dispatch.c). */
int sn_cli_main(int argc, char **argv);

int sn_cmd_devices(int argc, char **argv);
int sn_cmd_train(int argc, char **argv);
int sn_cmd_evaluate(int argc, char **argv);
int sn_cmd_predict(int argc, char **argv);
int sn_cmd_summary(int argc, char **argv);
int sn_cmd_export(int argc, char **argv);
int sn_cmd_bench(int argc, char **argv);
int sn_cmd_plot(int argc, char **argv);
int sn_cmd_generate(int argc, char **argv);
int sn_cmd_serve(int argc, char **argv);

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
/* Where the examples come from: --dataset/--data-dir (IDX folders) or --data PATH, whose kind
 * is told by what it is: a folder (IDX), .npy (x; labels from --labels), .npz (arrays x_train/
 * y_train and x_test/y_test, or x/y), .tfrecord/.tfrecords (tf.train.Example, features
 * --image-feature/--label-feature, shape --input-shape), .txt or --text (a text corpus for
 * character models, which train, evaluate and predict read themselves, not through here). */
typedef struct sn_cli_data_opts {
    const char *dataset, *data_dir;
    const char *data, *labels;
    const char *image_feature, *label_feature; /* defaults "image", "label" */
    const char *input_shape;                   /* "28,28,1": reshapes every example */
    bool text;                                 /* --text: read --data as text */
    bool labels_optional; /* predict: x.npy alone, an .npz without y, a TFRecord without the
                           * label feature give *y = NULL instead of an error */
    bool check_numerics;  /* --check-numerics: scan examples for NaN/Inf */
} sn_cli_data_opts;
sn_cli_data_opts sn_cli_data_defaults(void);
/* Whether --data names a text corpus (.txt or --text). */
bool sn_cli_data_is_text(const sn_cli_data_opts *o);
/* Split "train" or "test" of the data as tensors the caller frees: x u8, i32, f32 or f64
 * [n, ...] (reshaped by --input-shape), y [n] of class indices (NULL when there are none and
 * o->labels_optional); with --check-numerics, x holds no NaN or Inf (sn_data_check_numerics).
 * A source with one split gives
 * it for "train"; for "test" it gives nothing (*x = *y = NULL, return 0) unless `required`, in
 * which case it gives that one split too (evaluate and predict read it). Prints the error
 * (naming the file, array or record and field) and returns 1 (2 for a bad flag). */
int sn_cli_load_data(const char *prog, const sn_cli_data_opts *o, const char *split,
                     bool required, sn_tensor **x, sn_tensor **y);
/* Their flags, as entries of an sn_flag array (o: the address of an sn_cli_data_opts). */
#define SN_CLI_DATA_FLAGS(o)                                                                   \
    {.name = "data", .kind = SN_FLAG_STRING, .value = &(o)->data, .metavar = "PATH",           \
     .help = "an IDX folder, x.npy (+ --labels), .npz, .tfrecord(s), or text (.txt: "         \
             "character models)"},                                                             \
    {.name = "labels", .kind = SN_FLAG_STRING, .value = &(o)->labels, .metavar = "PATH",       \
     .help = "with --data x.npy: the labels (.npy, one class index per example; predict goes "  \
             "without)"},             \
    {.name = "image-feature", .kind = SN_FLAG_STRING, .value = &(o)->image_feature,            \
     .metavar = "NAME", .help = "TFRecord: the feature of the examples (raw u8 bytes or floats)"}, \
    {.name = "label-feature", .kind = SN_FLAG_STRING, .value = &(o)->label_feature,            \
     .metavar = "NAME", .help = "TFRecord: the int64 feature of the labels"},                  \
    {.name = "input-shape", .kind = SN_FLAG_STRING, .value = &(o)->input_shape,                \
     .metavar = "D1,D2,...", .default_text = "TFRecord 28,28; others the data's own",          \
     .help = "shape of one example (e.g. 28,28,1)"},                                          \
    {.name = "check-numerics", .kind = SN_FLAG_BOOL, .value = &(o)->check_numerics,            \
     .help = "scan the examples for NaN/Inf when loading; stop naming the first one's example " \
             "and feature"}
/* The input pipeline over copies of x and y (y may be NULL: elements are then x alone): the
 * first `take` elements (-1: all), a seeded shuffle (reshuffled each epoch) when `shuffle`,
 * examples to f32 (u8 scaled to [0, 1], others cast; [rows, cols] images get a channel:
 * [rows, cols, 1]), labels to i32, batches, prefetch. The caller frees *out. */
sn_status sn_cli_pipeline(sn_tensor *x, sn_tensor *y, int64_t take, int64_t batch, bool shuffle,
                          uint64_t seed, bool drop_remainder, sn_dataset **out);
/* --model: a model file when the name ends in .keras or .json or names an existing file;
 * else a preset name. */
bool sn_cli_model_is_preset(const char *name);
/* The model `name` for examples like those of `images` ([n, ...]; NULL: 28x28x1, and no
 * check), with a channel added to [rows, cols] images as the pipeline does: a preset is built
 * for them from `seed`; a model file is loaded (its weights too, for .keras; JSON models are
 * initialised from `seed`) and its input shape must be the examples'. info (may be NULL)
 * receives what the file held. The caller frees *out. */
sn_status sn_cli_open_model(const char *name, const sn_tensor *images, uint64_t seed,
                            sn_model **out, sn_model_file_info *info);
/* The same without info (presets and files alike). */
sn_status sn_cli_build_model(const char *preset, const sn_tensor *images, uint64_t seed,
                             sn_model **out);
/* For the commands that run saved weights (evaluate, predict, serve): the model opened as
 * above (seed 0), compiled with the file's compile settings (defaults for presets) and
 * loaded from `weights`, which only a .keras file may go without. The caller frees *out; on
 * an error nothing is left to free. */
/* SN_ERR_UNSUPPORTED naming the model and its counts unless it has one input and one output
 * (the commands that feed data feed one array of examples). */
sn_status sn_cli_check_one_io(const char *name, const sn_model *m);
sn_status sn_cli_load_model(const char *preset, const sn_tensor *images, const char *weights,
                            sn_model **out);
/* True (after printing the usage error "--weights PATH is required ...") when `weights` is
 * NULL and the model's name does not end in .keras (only a .keras file carries its weights). */
bool sn_cli_weights_missing(const char *prog, const char *model, const char *weights);
#define SN_CLI_MODEL_HELP                                                                      \
    "model preset (tpu_guide_cnn, small_cnn, mlp; character models char_lstm_small, char_lstm) " \
    "or Keras model file (.keras, .json)"
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

/* ---- character models (text_model.c) ---------------------------------------------------- */
#include "sinter/data.h"
/* NULL-terminated names of the character model presets (sized by a vocabulary). */
extern const char *const sn_cli_text_models[];
bool sn_cli_is_text_model(const char *name);
/* Reads the whole file `path` into *text (caller frees; not NUL-terminated) and *len. Prints
 * "<prog>: <what>: cannot read ..." and returns 1 when it cannot. */
int sn_cli_read_file(const char *prog, const char *what, const char *path, char **text,
                     size_t *len);
typedef struct sn_cli_text_model_opts {
    const char *name;                /* char_lstm_small or char_lstm */
    const char *weights;             /* --weights: loaded into the model; NULL: from seed */
    const char *vocab;               /* --vocab; NULL: W.vocab.json beside the weights */
    const char *text;                /* --data TEXT: its characters, when no vocabulary file */
    bool takes_text;                 /* the command has --data TEXT (its errors mention it) */
    int64_t seq_length;              /* the input shape the model is built for */
    uint64_t seed;                   /* initial weights when there are none to load */
    const sn_compile_opts *compile;  /* compiled with these (before loading) unless NULL */
} sn_cli_text_model_opts;
/* The vocabulary of the text a character model was trained on, which sizes it: the file
 * o->vocab, else the one beside o->weights (sinter train --save writes it there), else the
 * characters of o->text. Prints the error, saying what to give on the command line when no
 * vocabulary can be had, and returns the exit code (0: the caller frees *out). */
int sn_cli_text_vocab(const char *prog, const sn_cli_text_model_opts *o, sn_vocab **out);
/* The preset o->name sized by `vocab`, built for sequences of o->seq_length, compiled with
 * o->compile (unless NULL) and loaded from o->weights (else initialised from o->seed). Prints
 * the error and returns 1; 0 on success (the caller frees *out). */
int sn_cli_open_text_model(const char *prog, const sn_cli_text_model_opts *o,
                           const sn_vocab *vocab, sn_model **out);
/* The flags --vocab and --seq-length of the commands that open character models (addresses
 * of a const char * and an int64_t). */
#define SN_CLI_VOCAB_FLAG(vocab)                                                               \
    {.name = "vocab", .kind = SN_FLAG_STRING, .value = (vocab), .metavar = "PATH",             \
     .default_text = "W.vocab.json beside --weights, else the characters of --data TEXT",       \
     .help = "character models: the vocabulary saved with the weights"}
#define SN_CLI_SEQ_LENGTH_FLAG(seq_length)                                                     \
    {.name = "seq-length", .kind = SN_FLAG_INT, .value = (seq_length), .imin = 1,              \
     .imax = 1000000, .help = "character models: characters per sequence"}

/* ---- pictures of a model's mistakes (eval_plots.c) ------------------------------------- */
/* Whether the data is Fashion-MNIST by name (--dataset, no --data-dir or --data): its classes
 * then have names (T-shirt/top, ...); others are numbered 0, 1, ... */
bool sn_cli_is_fashion_mnist(const sn_cli_data_opts *o);
typedef struct sn_cli_eval_plot_opts {
    const char *misclassified; /* PNG path or NULL */
    int64_t max_images;        /* >= 1 */
    const char *confusion;     /* PNG path or NULL */
} sn_cli_eval_plot_opts;
/* Predicts every test example (test: the unshuffled pipeline over x [n, ...] and y [n]),
 * prints "Misclassified: W/N" and writes the requested PNGs (the grid needs grayscale images:
 * x [n, rows, cols] or [n, rows, cols, 1]). Returns the exit code. */
int sn_cli_eval_plots(const char *prog, sn_model *m, sn_dataset *test, const sn_tensor *x,
                      const sn_tensor *y, bool fashion_names, const sn_cli_eval_plot_opts *o);

#endif
