/* The guide's "manual device placement": c = matmul(a, b) on a named device, run at once (an
 * eager op is a one-node graph, planned and executed immediately). */
#include <stdio.h>

#include "sinter/device.h"
#include "sinter/graph.h"

int main(int argc, char **argv) {
    const char *device = argc > 1 ? argv[1] : "cpu:0";
    float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 2, 3, 4, 5, 6};
    sn_shape sa = {.ndim = 2, .dim = {2, 3}}, sb = {.ndim = 2, .dim = {3, 2}};
    sn_graph *g = sn_graph_new();
    if (!g) return 1;
    sn_node c = sn_matmul(g, sn_const(g, SN_F32, &sa, a), sn_const(g, SN_F32, &sb, b), false, false);
    sn_tensor *t = NULL;
    if (sn_eval(g, c, device, &t) != SN_OK) {
        fprintf(stderr, "device_placement: %s\n", sn_last_error());
        sn_graph_free(g);
        return 1;
    }
    int idx = 0;
    sn_device_info info;
    sn_device_find(device, &idx);
    sn_device_get(idx, &info);
    const float *r = sn_tensor_cdata(t);
    printf("c device: %s\n", info.name);
    printf("tf.Tensor(\n[[%g. %g.]\n [%g. %g.]], shape=(2, 2), dtype=float32)\n", r[0], r[1], r[2], r[3]);
    sn_tensor_free(t);
    sn_graph_free(g);
    return 0;
}
