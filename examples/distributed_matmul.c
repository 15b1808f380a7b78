/* The guide's distribution example: the same matmul run on every replica of a strategy.
 *
 *     a = tf.constant([[1., 2., 3.], [4., 5., 6.]])
 *     b = tf.constant([[1., 2.], [3., 4.], [5., 6.]])
 *     z = strategy.run(matmul_fn, args=(a, b)); print(z)
 *
 * Usage: distributed_matmul [N]   (N logical CPU devices, default 8; the same split as
 * `sinter devices --cpu-devices N`). Prints PerReplica:{...} with N identical results and
 * their SUM reduction. */
#include <stdio.h>
#include <stdlib.h>

#include "sinter/dist.h"
#include "sinter/graph.h"

static sn_status matmul_fn(void *ctx, const sn_replica_context *rc, sn_tensor **out) {
    (void)ctx;
    static const float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 2, 3, 4, 5, 6};
    sn_shape sa = {.ndim = 2, .dim = {2, 3}}, sb = {.ndim = 2, .dim = {3, 2}};
    sn_graph *g = sn_graph_new();
    if (!g) return SN_ERR_NOMEM;
    sn_node z = sn_matmul(g, sn_const(g, SN_F32, &sa, a), sn_const(g, SN_F32, &sb, b), false, false);
    /* An eager op placed on the replica's device. */
    sn_status s = sn_eval(g, z, rc->device, out);
    sn_graph_free(g);
    return s;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    sn_strategy *s = NULL;
    sn_per_replica *z = NULL;
    sn_tensor *sum = NULL;
    int rc = 1;
    if (sn_device_configure_cpu(n) != SN_OK || sn_strategy_mirrored(0, NULL, &s) != SN_OK ||
        sn_strategy_run(s, matmul_fn, NULL, &z) != SN_OK)
        goto done;
    printf("Number of replicas: %d\n", sn_strategy_num_replicas(s));
    if (sn_per_replica_print(z, stdout) != SN_OK) goto done;
    printf("\nstrategy.reduce(SUM): ");
    if (sn_strategy_reduce(s, SN_REDUCE_SUM, z, -1, &sum) != SN_OK ||
        sn_tensor_print_tf(sum, stdout) != SN_OK)
        goto done;
    printf("\n");
    rc = 0;
done:
    if (rc) fprintf(stderr, "distributed_matmul: %s\n", sn_last_error());
    sn_tensor_free(sum);
    sn_per_replica_free(z);
    sn_strategy_free(s);
    return rc;
}
