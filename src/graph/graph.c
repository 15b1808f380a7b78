/* The graph builder: nodes appended in creation order (which is a topological order, since a
 * node's inputs exist before it), sticky errors, leaves and the variable buffer. */
#include <stdarg.h>
#include <string.h>

#include "graph/graph_impl.h"

sn_graph *sn_graph_new(void) {
    sn_graph *g = sn_calloc(1, sizeof *g);
    return g;
}

void sn_graph_free(sn_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        free(g->nodes[i].name);
        free(g->nodes[i].const_data);
    }
    free(g->nodes);
    sn_free_aligned(g->vars);
    free(g);
}

sn_status sn_graph_status(const sn_graph *g) {
    if (!g) return sn_errorf(SN_ERR_INVALID, "graph is NULL");
    return g->status;
}

int sn_graph_node_count(const sn_graph *g) { return g ? g->n_nodes : 0; }

sn_node sn_graph_fail(sn_graph *g, sn_status code, const char *fmt, ...) {
    if (g->status != SN_OK) return SN_NONE; /* keep the first, most useful, message */
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g->status = sn_errorf(code, "%s", buf);
    return SN_NONE;
}

bool sn_dtype_is_float(sn_dtype t) { return t == SN_F32 || t == SN_F64 || t == SN_BF16; }

bool sn_norm_axis(int axis, int ndim, int *out) {
    if (axis < -ndim || axis >= ndim) return false;
    *out = axis < 0 ? axis + ndim : axis;
    return true;
}

bool sn_broadcast_shape(const sn_shape *a, const sn_shape *b, sn_shape *out) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    sn_shape r = {.ndim = n};
    for (int i = 0; i < n; i++) {
        int ia = a->ndim - n + i, ib = b->ndim - n + i;
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        r.dim[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

static bool valid_node(const sn_graph *g, sn_node n) { return n >= 0 && n < g->n_nodes; }

static sn_node push_node(sn_graph *g, const sn_node_t *proto) {
    if (g->n_nodes == g->cap_nodes) {
        int cap = g->cap_nodes ? 2 * g->cap_nodes : 64;
        sn_node_t *nodes = sn_realloc(g->nodes, sizeof *nodes * (size_t)cap);
        if (!nodes) return sn_graph_fail(g, SN_ERR_NOMEM, "%s", sn_last_error());
        g->nodes = nodes;
        g->cap_nodes = cap;
    }
    g->nodes[g->n_nodes] = *proto;
    return g->n_nodes++;
}

sn_node sn_graph_add(sn_graph *g, sn_op op, int n_in, const sn_node *in, const sn_attrs *attr) {
    if (!g) {
        sn_errorf(SN_ERR_INVALID, "graph is NULL");
        return SN_NONE;
    }
    if (g->status != SN_OK) return SN_NONE;
    const sn_op_def *def = sn_ops[op];
    SN_ASSERT(def->name != NULL);
    if (n_in < 0 || n_in > SN_MAX_INPUTS || (def->n_in >= 0 && n_in != def->n_in))
        return sn_graph_fail(g, SN_ERR_INVALID, "%s: takes %d inputs, got %d", def->name,
                             def->n_in, n_in);
    sn_node_t node = {.op = op, .n_in = n_in};
    for (int i = 0; i < n_in; i++) {
        if (!valid_node(g, in[i]))
            return sn_graph_fail(g, SN_ERR_INVALID,
                                 "%s: input %d is not a node of this graph (got %d, the graph "
                                 "has %d nodes)", def->name, i, (int)in[i], g->n_nodes);
        node.in[i] = in[i];
    }
    if (attr) node.attr = *attr;
    if (def->side_effect) node.flags |= SN_NODE_SIDE_EFFECT;
    if (def->infer) {
        sn_status s = def->infer(g, &node);
        if (s != SN_OK) return sn_graph_fail(g, s, "%s", sn_last_error());
    }
    return push_node(g, &node);
}

/* ---- leaves ---------------------------------------------------------------------------- */
static sn_status check_leaf(const sn_graph *g, const char *what, sn_dtype dtype,
                            const sn_shape *shape) {
    char b[128];
    if ((unsigned)dtype >= SN_DTYPE_COUNT)
        return sn_errorf(SN_ERR_INVALID, "%s: dtype %d is not a sinter dtype", what, (int)dtype);
    if (!shape) return sn_errorf(SN_ERR_INVALID, "%s: shape is NULL", what);
    if (shape->ndim < 0 || shape->ndim > SN_MAX_DIMS)
        return sn_errorf(SN_ERR_SHAPE, "%s: rank %d is outside [0, %d]", what, shape->ndim,
                         SN_MAX_DIMS);
    for (int i = 0; i < shape->ndim; i++)
        if (shape->dim[i] <= 0)
            return sn_errorf(SN_ERR_SHAPE, "%s: shape %s: dimension %d must be positive", what,
                             sn_shape_str(shape, b, sizeof b), i);
    return SN_OK;
}

static sn_node add_leaf(sn_graph *g, sn_op op, const char *name, sn_dtype dtype,
                        const sn_shape *shape) {
    if (!g) {
        sn_errorf(SN_ERR_INVALID, "graph is NULL");
        return SN_NONE;
    }
    if (g->status != SN_OK) return SN_NONE;
    char what[160];
    snprintf(what, sizeof what, "%s '%s'", sn_ops[op]->name, name ? name : "");
    sn_status s = check_leaf(g, what, dtype, shape);
    if (s != SN_OK) return sn_graph_fail(g, s, "%s", sn_last_error());
    sn_node_t node = {.op = op, .dtype = dtype, .shape = *shape};
    if (name && !(node.name = sn_strdup(name)))
        return sn_graph_fail(g, SN_ERR_NOMEM, "%s", sn_last_error());
    sn_node id = push_node(g, &node);
    if (id == SN_NONE) free(node.name);
    return id;
}

sn_node sn_input(sn_graph *g, const char *name, sn_dtype dtype, const sn_shape *shape) {
    return add_leaf(g, SN_OP_INPUT, name, dtype, shape);
}

sn_node sn_variable(sn_graph *g, const char *name, sn_dtype dtype, const sn_shape *shape,
                    bool trainable) {
    sn_node id = add_leaf(g, SN_OP_VARIABLE, name, dtype, shape);
    if (id == SN_NONE) return id;
    size_t bytes = (size_t)sn_shape_numel(shape) * sn_dtype_size(dtype);
    size_t offset = g->vars_bytes, need = offset + ((bytes + 63) & ~(size_t)63);
    if (need > g->vars_cap) {
        size_t cap = g->vars_cap ? g->vars_cap : 4096;
        while (cap < need) cap *= 2;
        unsigned char *v = sn_malloc_aligned(cap);
        if (!v) return sn_graph_fail(g, SN_ERR_NOMEM, "variable '%s': %s", name ? name : "",
                                     sn_last_error());
        if (g->vars) memcpy(v, g->vars, g->vars_bytes);
        sn_free_aligned(g->vars);
        g->vars = v;
        g->vars_cap = cap;
    }
    memset(g->vars + offset, 0, need - offset);
    g->vars_bytes = need;
    g->vars_version++;
    g->nodes[id].var_offset = offset;
    if (trainable) g->nodes[id].flags |= SN_NODE_TRAINABLE;
    return id;
}

sn_node sn_const(sn_graph *g, sn_dtype dtype, const sn_shape *shape, const void *data) {
    if (g && g->status == SN_OK && !data)
        return sn_graph_fail(g, SN_ERR_INVALID, "const: data is NULL");
    sn_node id = add_leaf(g, SN_OP_CONST, NULL, dtype, shape);
    if (id == SN_NONE) return id;
    size_t bytes = (size_t)sn_shape_numel(shape) * sn_dtype_size(dtype);
    void *copy = sn_malloc_aligned(bytes);
    if (!copy) return sn_graph_fail(g, SN_ERR_NOMEM, "const: %s", sn_last_error());
    memcpy(copy, data, bytes);
    g->nodes[id].const_data = copy;
    return id;
}

sn_node sn_scalar(sn_graph *g, sn_dtype dtype, double value) {
    unsigned char buf[8];
    switch (dtype) {
    case SN_F32: { float v = (float)value; memcpy(buf, &v, 4); break; }
    case SN_F64: memcpy(buf, &value, 8); break;
    case SN_BF16: { uint16_t v = sn_f32_to_bf16((float)value); memcpy(buf, &v, 2); break; }
    case SN_I32: { int32_t v = (int32_t)value; memcpy(buf, &v, 4); break; }
    case SN_U8: buf[0] = (unsigned char)value; break;
    default: break;
    }
    sn_shape s = {.ndim = 0};
    return sn_const(g, dtype, &s, buf);
}

/* ---- introspection --------------------------------------------------------------------- */
sn_dtype sn_node_dtype(const sn_graph *g, sn_node n) {
    return g && valid_node(g, n) ? g->nodes[n].dtype : SN_DTYPE_COUNT;
}

sn_shape sn_node_shape(const sn_graph *g, sn_node n) {
    sn_shape none = {.ndim = -1};
    return g && valid_node(g, n) ? g->nodes[n].shape : none;
}

const char *sn_node_name(const sn_graph *g, sn_node n) {
    return g && valid_node(g, n) && g->nodes[n].name ? g->nodes[n].name : "";
}

const char *sn_node_op_name(const sn_graph *g, sn_node n) {
    return g && valid_node(g, n) ? sn_ops[g->nodes[n].op]->name : "";
}

int sn_graph_variables(const sn_graph *g, bool trainable_only, sn_node *out, int cap) {
    int count = 0;
    for (int i = 0; g && i < g->n_nodes; i++) {
        const sn_node_t *n = &g->nodes[i];
        if (n->op != SN_OP_VARIABLE) continue;
        if (trainable_only && !(n->flags & SN_NODE_TRAINABLE)) continue;
        if (out && count < cap) out[count] = i;
        count++;
    }
    return count;
}

void *sn_variable_data(sn_graph *g, sn_node var) {
    if (!g || !valid_node(g, var) || g->nodes[var].op != SN_OP_VARIABLE) {
        sn_errorf(SN_ERR_INVALID, "node %d is not a variable", (int)var);
        return NULL;
    }
    g->vars_version++; /* the caller may write it */
    return g->vars + g->nodes[var].var_offset;
}

void *sn_graph_variable_buffer(sn_graph *g, size_t *bytes) {
    if (bytes) *bytes = g ? g->vars_bytes : 0;
    if (g) g->vars_version++;
    return g ? g->vars : NULL;
}
