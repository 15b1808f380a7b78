/* The finite-difference loop of the gradient checks (test_gradcheck.c, test_rnn.c,
 * test_activations.c): one copy. */
#ifndef SN_FD_TEST_UTIL_H
#define SN_FD_TEST_UTIL_H

#include <math.h>
#include <stdio.h>

#include "sinter/graph.h"

/* The plan's loss (a double scalar target) after one run at step 0, so that a dropout mask is
 * the same at every evaluation; NaN (and a line) when the run fails. */
static inline double fd_loss(sn_plan *p, sn_node loss) {
    sn_plan_set_step(p, 0);
    if (sn_plan_run(p, 1, NULL, NULL) != SN_OK) {
        fprintf(stderr, "run failed: %s\n", sn_last_error());
        return NAN;
    }
    return *(double *)sn_plan_buffer(p, loss);
}

/* Central differences (eps 1e-6) of the loss over each x[j], j < n (x a double input buffer
 * of p, restored after), against the analytic gradient ga[j]: the relative error
 * |num - ga| / max(1, |num|, |ga|). Raises *worst to the largest; returns how many exceed tol,
 * the first 3 printed with `what`. */
static inline int fd_check(sn_plan *p, sn_node loss, double *x, const double *ga, int64_t n,
                           double tol, const char *what, double *worst) {
    int bad = 0;
    for (int64_t j = 0; j < n; j++) {
        const double eps = 1e-6;
        double x0 = x[j];
        x[j] = x0 + eps;
        double lp = fd_loss(p, loss);
        x[j] = x0 - eps;
        double lm = fd_loss(p, loss);
        x[j] = x0;
        double num = (lp - lm) / (2 * eps);
        double err = fabs(num - ga[j]) / fmax(1.0, fmax(fabs(num), fabs(ga[j])));
        if (err > *worst) *worst = err;
        if (!(err <= tol) && bad++ < 3)
            fprintf(stderr, "  %s [%lld] (x = %g): analytic %.12g numeric %.12g\n", what,
                    (long long)j, x0, ga[j], num);
    }
    return bad;
}

#endif
