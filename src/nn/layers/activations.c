/* Activations by Keras name (keras/src/activations/__init__.py spells them) and as graph
 * nodes. */
#include <string.h>

#include "nn/nn_impl.h"

static const struct {
    sn_activation act;
    const char *name;
} act_names[] = {
    {SN_ACT_NONE, "linear"},   {SN_ACT_RELU, "relu"},       {SN_ACT_SIGMOID, "sigmoid"},
    {SN_ACT_TANH, "tanh"},     {SN_ACT_SOFTMAX, "softmax"}, {SN_ACT_GELU, "gelu"},
    {SN_ACT_SILU, "silu"},     {SN_ACT_ELU, "elu"},         {SN_ACT_LEAKY_RELU, "leaky_relu"},
    {SN_ACT_RELU6, "relu6"},
};
enum { N_ACT_NAMES = sizeof act_names / sizeof act_names[0] };

sn_status sn_activation_from_name(const char *name, sn_activation *out) {
    if (!name || !out)
        return sn_errorf(SN_ERR_INVALID, "sn_activation_from_name: %s is NULL",
                         !name ? "name" : "out");
    for (int i = 0; i < N_ACT_NAMES; i++)
        if (strcmp(name, act_names[i].name) == 0) {
            *out = act_names[i].act;
            return SN_OK;
        }
    /* Keras registers silu under both names ("swish" is the older one). */
    if (strcmp(name, "swish") == 0) {
        *out = SN_ACT_SILU;
        return SN_OK;
    }
    char acc[256];
    size_t n = 0;
    for (int i = 0; i < N_ACT_NAMES && n < sizeof acc; i++)
        n += (size_t)snprintf(acc + n, sizeof acc - n, "'%s', ", act_names[i].name);
    return sn_errorf(SN_ERR_NOT_FOUND, "unknown activation '%s'; accepted: %s'swish'", name, acc);
}

const char *sn_activation_name(sn_activation a) {
    for (int i = 0; i < N_ACT_NAMES; i++)
        if (act_names[i].act == a) return act_names[i].name;
    return NULL;
}

bool sn_activation_valid(sn_activation a) { return a >= SN_ACT_NONE && a <= SN_ACT_RELU6; }

sn_node sn_apply_activation(sn_graph *g, sn_node x, sn_activation act) {
    switch (act) {
    case SN_ACT_NONE: return x;
    case SN_ACT_RELU: return sn_relu(g, x);
    case SN_ACT_SIGMOID: return sn_sigmoid(g, x);
    case SN_ACT_TANH: return sn_tanh(g, x);
    case SN_ACT_SOFTMAX: return sn_softmax(g, x, -1);
    case SN_ACT_GELU: return sn_gelu(g, x);
    case SN_ACT_SILU: return sn_silu(g, x);
    case SN_ACT_ELU: return sn_elu(g, x, 1.0);
    /* keras.activations.leaky_relu's default negative_slope (the LeakyReLU layer's is 0.3,
     * but activation="leaky_relu" calls the function) */
    case SN_ACT_LEAKY_RELU: return sn_leaky_relu(g, x, 0.2);
    case SN_ACT_RELU6: return sn_relu6(g, x);
    }
    return sn_graph_fail(g, SN_ERR_INVALID, "unknown activation %d", (int)act);
}
