/* sinter devices: what TensorFlow's tf.config.list_logical_devices() shows, after an optional
 * split of the CPU into N logical devices (tf.config.set_logical_device_configuration), then
 * the GPUs the CUDA runtime finds (or one line saying why there are none). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/gpu.h"
#include "cli/cli.h"
#include "core/core.h"
#include "sinter/device.h"

static int usage(FILE *f, int rc) {
    fprintf(f, "usage: sinter devices [--cpu-devices N]\n\n"
               "Lists the logical devices with their TensorFlow-style names and threads,\n"
               "then the GPUs (name, memory, compute capability) or why none was found.\n\n"
               "  --cpu-devices N  split the CPU into N logical devices (1 to %d), each with\n"
               "                   max(1, cores / N) threads; more devices than cores share\n"
               "                   the cores\n", SN_MAX_LOGICAL_DEVICES);
    return rc;
}

int sn_cmd_devices(int argc, char **argv) {
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout, 0);
        const char *v = NULL;
        if (!strcmp(argv[i], "--cpu-devices")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sinter devices: --cpu-devices needs a value (1 to %d)\n",
                        SN_MAX_LOGICAL_DEVICES);
                return 2;
            }
            v = argv[++i];
        } else if (!strncmp(argv[i], "--cpu-devices=", 14)) {
            v = argv[i] + 14;
        } else {
            fprintf(stderr, "sinter devices: unknown flag '%s' (accepted: --cpu-devices N, --help)\n",
                    argv[i]);
            return 2;
        }
        char *end;
        long x = strtol(v, &end, 10);
        if (!*v || *end || x < 1 || x > SN_MAX_LOGICAL_DEVICES) {
            fprintf(stderr, "sinter devices: --cpu-devices: '%s' is not an integer from 1 to %d\n",
                    v, SN_MAX_LOGICAL_DEVICES);
            return 2;
        }
        n = (int)x;
    }
    if (n > 0 && sn_device_configure_cpu(n) != SN_OK) {
        fprintf(stderr, "sinter devices: %s\n", sn_last_error());
        return 1;
    }
    const sn_cpu_features *f = sn_cpu();
    for (int i = 0; i < sn_device_count(); i++) {
        sn_device_info d;
        if (sn_device_get(i, &d) != SN_OK) {
            fprintf(stderr, "sinter devices: %s\n", sn_last_error());
            return 1;
        }
        if (d.kind != SN_DEVICE_CPU) continue; /* GPUs: below, with what the runtime says */
        /* +bf16 alone: mixed bf16 computes in bfloat16 here; "(f32 under bf16)": the CPU has
         * AVX512-BF16 but bf16 arithmetic is slower than f32 on it (sn_cpu_bf16_pays) */
        printf("%s  threads=%d  isa=%s%s%s\n", d.name, d.threads,
               f->avx512f ? "avx512" : f->avx2 ? "avx2" : "generic",
               f->avx512_bf16 ? "+bf16" : "",
               f->avx512_bf16 && !sn_cpu_bf16_pays() ? " (f32 under mixed bf16: faster here)" : "");
    }
    int ngpu = sn_gpu_count();
    if (ngpu == 0) printf("no GPU found: %s\n", sn_gpu_none_reason());
    for (int i = 0; i < ngpu; i++) {
        sn_gpu_info g;
        if (sn_gpu_get(i, &g) != SN_OK) {
            fprintf(stderr, "sinter devices: %s\n", sn_last_error());
            return 1;
        }
        printf("/job:localhost/replica:0/task:0/device:GPU:%d  name=\"%s\"  memory=%.1f GiB  "
               "compute_capability=%d.%d  multiprocessors=%d\n", g.index, g.name,
               (double)g.memory_bytes / (1024.0 * 1024.0 * 1024.0), g.cc_major, g.cc_minor,
               g.multiprocessors);
    }
    return 0;
}
