/* sinter devices: what TensorFlow's tf.config.list_logical_devices() shows. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "core/core.h"
#include "sinter/device.h"

int sn_cmd_devices(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: sinter devices\n\nLists the logical devices with their TensorFlow-style names.\n");
            return 0;
        }
        fprintf(stderr, "sinter devices: unknown flag '%s' (accepted: --help)\n", argv[i]);
        return 2;
    }
    const sn_cpu_features *f = sn_cpu();
    for (int i = 0; i < sn_device_count(); i++) {
        sn_device_info d;
        if (sn_device_get(i, &d) != SN_OK) {
            fprintf(stderr, "sinter devices: %s\n", sn_last_error());
            return 1;
        }
        printf("%s  threads=%d  isa=%s%s\n", d.name, d.threads,
               f->avx512f ? "avx512" : f->avx2 ? "avx2" : "generic",
               f->avx512_bf16 ? "+bf16" : "");
    }
    return 0;
}
