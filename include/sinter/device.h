/* sinter — logical devices and placement.
 *
 * Devices have TensorFlow-style names ("/job:localhost/replica:0/task:0/device:CPU:0"); the
 * short forms "cpu:0", "CPU:0", "/device:CPU:0" and "/cpu:0" name the same device. */
#ifndef SINTER_DEVICE_H
#define SINTER_DEVICE_H

#include "sinter/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sn_device_kind { SN_DEVICE_CPU = 0, SN_DEVICE_GPU = 1 } sn_device_kind;

typedef struct sn_device_info {
    char name[96];          /* the full TensorFlow-style name */
    sn_device_kind kind;
    int index;              /* CPU:<index> */
    int threads;            /* cores given to this logical device */
    long long memory_bytes; /* 0 when the device shares host memory */
} sn_device_info;

#define SN_MAX_LOGICAL_DEVICES 256

/* Splits the CPU into n logical devices CPU:0 .. CPU:n-1 (TensorFlow's logical device
 * configuration). Call it once, before the devices are used. Device i gets
 * max(1, cores / n) threads (the first cores % n devices one more); with n > cores every
 * device has one thread and devices share the cores round-robin. SN_ERR_INVALID outside
 * [1, SN_MAX_LOGICAL_DEVICES]. */
sn_status sn_device_configure_cpu(int n);
/* How many logical devices this process has (at least one CPU). */
int sn_device_count(void);
/* Threads of device i (0 when i is out of range). */
int sn_device_threads(int i);
/* Fills *info for device i; SN_ERR_INVALID when i is out of range. */
sn_status sn_device_get(int i, sn_device_info *info);
/* Resolves a name (full or short form) to a device index; NULL or "" is the default device 0.
 * An unknown or out-of-range name is SN_ERR_NOT_FOUND with a message listing the devices. */
sn_status sn_device_find(const char *name, int *index);

/* The one team of threads (OpenMP) that serves sinter's kernels, oneDNN and OpenBLAS. Its size
 * comes from SN_NUM_THREADS, else all cores; sn_set_num_threads changes it (n >= 1). */
int sn_num_threads(void);
void sn_set_num_threads(int n);

#ifdef __cplusplus
}
#endif
#endif
