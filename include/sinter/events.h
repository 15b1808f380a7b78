/* sinter — TensorBoard event files.
 *
 * An event file is a TFRecord file (sinter/data.h's framing: length, masked CRC-32C of the
 * length, data, masked CRC-32C of the data) of serialized tensorboard.Event messages. The
 * first record carries file_version "brain.Event:2"; each later one a Summary with one value:
 * a scalar (simple_value) or a histogram (HistogramProto). TensorBoard reads these directly
 * (its data_compat layer turns both into its scalar and histogram plugins' data).
 *
 *     sn_event_writer *w;
 *     sn_event_writer_open("logs/train", &w);            // creates the folder (and parents)
 *     sn_event_write_scalar(w, "epoch_loss", 0, 0.51);
 *     sn_event_writer_close(w);
 *
 * Files are named events.out.tfevents.<seconds>.<host>.<pid>.<n> as TensorFlow names them
 * (n counts the writers this process opened), so two writers never share a file. */
#ifndef SINTER_EVENTS_H
#define SINTER_EVENTS_H

#include <stdint.h>

#include "sinter/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sn_event_writer sn_event_writer;

/* Creates `dir` (with its parents) when missing and a new event file in it holding the
 * file_version record. The caller closes *out with sn_event_writer_close. */
sn_status sn_event_writer_open(const char *dir, sn_event_writer **out);
/* The file's path (owned by the writer). */
const char *sn_event_writer_path(const sn_event_writer *w);
/* One scalar at `step`; TensorBoard keeps it as a float32, as tf.summary does. */
sn_status sn_event_write_scalar(sn_event_writer *w, const char *tag, int64_t step, double value);
/* A histogram of n values (n >= 1, finite) at `step`: min, max, count, sum, sum of squares
 * and `buckets` equal-width buckets between min and max (0: 30, TensorFlow 2's default). */
sn_status sn_event_write_histogram(sn_event_writer *w, const char *tag, int64_t step,
                                   const float *values, int64_t n, int buckets);
/* Hands the records written so far to the operating system (TensorBoard then sees them). */
sn_status sn_event_writer_flush(sn_event_writer *w);
/* Flushes and closes; the flush's failure is reported here. NULL is fine. */
sn_status sn_event_writer_close(sn_event_writer *w);

#ifdef __cplusplus
}
#endif

#endif
