/* sinter plot: training curves (loss and accuracy per epoch) from a CSV log. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/flags.h"
#include "plot/plot.h"

int sn_cmd_plot(int argc, char **argv) {
    const char *prog = "sinter plot";
    const char *out = "curves.png";
    sn_flag flags[] = {
        {.name = "output", .kind = SN_FLAG_STRING, .value = &out, .metavar = "PNG",
         .help = "the picture to write (also -o PNG)"},
    };
    sn_flag_set fs = {prog,
                      "usage: sinter plot HISTORY.csv [-o PNG]\n"
                      "Draws loss and accuracy per epoch, training and validation, from the CSV "
                      "log of\nsinter train --csv (or Keras's CSVLogger).",
                      (int)(sizeof flags / sizeof flags[0]), flags};
    /* The one positional argument (the CSV) may stand anywhere; "-o" is --output. */
    const char *csv = NULL;
    char *rest[16];
    int nrest = 0;
    for (int i = 0; i < argc; i++) {
        bool takes_value = i > 0 && (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output"));
        if (i > 0 && argv[i][0] != '-') {
            if (csv) {
                fprintf(stderr, "%s: more than one CSV file ('%s', '%s')\n", prog, csv, argv[i]);
                return 2;
            }
            csv = argv[i];
            continue;
        }
        if (nrest + 2 > 16) {
            fprintf(stderr, "%s: too many arguments\n", prog);
            return 2;
        }
        rest[nrest++] = takes_value ? (char *)"--output" : argv[i];
        if (takes_value && i + 1 < argc) rest[nrest++] = argv[++i];
    }
    int rc = sn_flags_parse(&fs, nrest, rest);
    if (rc >= 0) return rc;
    if (!csv) {
        fprintf(stderr, "%s: missing the CSV log (usage: sinter plot HISTORY.csv -o curves.png)\n",
                prog);
        return 2;
    }
    sn_plot_table t;
    sn_plot_curves_layout lay;
    if (sn_plot_table_read_csv(csv, &t) != SN_OK || sn_plot_curves(&t, out, &lay) != SN_OK) {
        sn_plot_table_free(&t);
        sn_plot_release_caches();
        return sn_cli_fail(prog);
    }
    printf("Wrote %s (%dx%d): loss%s%s over %d epochs\n", out, lay.width, lay.height,
           lay.acc_name[0] ? " and " : "", lay.acc_name, t.n_rows);
    sn_plot_table_free(&t);
    sn_plot_release_caches();
    return 0;
}
