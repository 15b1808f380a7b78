/* oneDNN engine/stream singletons and error translation (see dnnl_util.h). */
#ifdef SN_HAVE_DNNL

#include "backend/cpu/dnnl_util.h"

#include <dnnl_debug.h>
#include <pthread.h>
#include <string.h>

static dnnl_engine_t g_engine;
static dnnl_stream_t g_stream;
static dnnl_status_t g_init_status = dnnl_success;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

sn_status sn_dnnl_error(dnnl_status_t s, const char *call, const char *file, int line) {
    sn_status code = SN_ERR_BACKEND;
    if (s == dnnl_out_of_memory) code = SN_ERR_NOMEM;
    else if (s == dnnl_unimplemented) code = SN_ERR_UNSUPPORTED;
    return sn_errorf(code, "oneDNN call %s failed with %s (%s:%d)", call, dnnl_status2str(s),
                     file, line);
}

static void init_once(void) {
    g_init_status = dnnl_engine_create(&g_engine, dnnl_cpu, 0);
    if (g_init_status != dnnl_success) {
        g_engine = NULL;
        return;
    }
    g_init_status = dnnl_stream_create(&g_stream, g_engine, dnnl_stream_default_flags);
    if (g_init_status != dnnl_success) g_stream = NULL;
}

static sn_status ensure_init(void) {
    if (pthread_once(&g_once, init_once) != 0)
        return sn_errorf(SN_ERR_BACKEND, "oneDNN: pthread_once failed while creating the engine");
    if (g_init_status != dnnl_success)
        return sn_dnnl_error(g_init_status, "dnnl_engine_create/dnnl_stream_create(dnnl_cpu)",
                             __FILE__, __LINE__);
    return SN_OK;
}

sn_status sn_dnnl_engine(dnnl_engine_t *out) {
    *out = NULL;
    SN_TRY(ensure_init());
    *out = g_engine;
    return SN_OK;
}

sn_status sn_dnnl_stream(dnnl_stream_t *out) {
    *out = NULL;
    SN_TRY(ensure_init());
    *out = g_stream;
    return SN_OK;
}

sn_status sn_dnnl_attr_user_scratchpad(dnnl_primitive_attr_t *out) {
    *out = NULL;
    SN_DNNL_CHECK(dnnl_primitive_attr_create(out));
    dnnl_status_t s = dnnl_primitive_attr_set_scratchpad_mode(*out, dnnl_scratchpad_mode_user);
    if (s != dnnl_success) {
        dnnl_primitive_attr_destroy(*out);
        *out = NULL;
        return sn_dnnl_error(s, "dnnl_primitive_attr_set_scratchpad_mode(user)", __FILE__,
                             __LINE__);
    }
    return SN_OK;
}

const char *sn_dnnl_impl_name(const_dnnl_primitive_desc_t pd) {
    const char *name = NULL;
    if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) != dnnl_success ||
        !name)
        return "?";
    return name;
}

static size_t round64(size_t b) { return (b + 63) & ~(size_t)63; }

static size_t pd_scratch(const_dnnl_primitive_desc_t pd, const dnnl_memory_desc_t **md) {
    *md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    return *md ? dnnl_memory_desc_get_size(*md) : 0;
}

void sn_dnnl_op_destroy(sn_dnnl_op *op) {
    if (op->prim) dnnl_primitive_destroy(op->prim);
    if (op->scratch) dnnl_memory_destroy(op->scratch);
    if (op->bias) dnnl_memory_destroy(op->bias);
    for (int j = 0; j < 3; j++) {
        if (op->user[j]) dnnl_memory_destroy(op->user[j]);
        if (op->inner[j]) dnnl_memory_destroy(op->inner[j]);
        if (op->reorder[j]) dnnl_primitive_destroy(op->reorder[j]);
        if (op->reorder_scratch[j]) dnnl_memory_destroy(op->reorder_scratch[j]);
    }
    memset(op, 0, sizeof *op);
}

/* Adds operand j's reorder between our layout and the primitive's (want), when they differ. */
static dnnl_status_t add_reorder(sn_dnnl_op *op, int j, const dnnl_memory_desc_t *user,
                                 const dnnl_memory_desc_t *want, dnnl_engine_t eng,
                                 const_dnnl_primitive_attr_t attr, size_t *pad,
                                 size_t *inner_bytes) {
    *inner_bytes = 0;
    if (dnnl_memory_desc_equal(user, want)) return dnnl_success;
    dnnl_primitive_desc_t rpd;
    dnnl_status_t st = j < 2 ? dnnl_reorder_primitive_desc_create(&rpd, user, eng, want, eng, attr)
                             : dnnl_reorder_primitive_desc_create(&rpd, want, eng, user, eng, attr);
    if (st != dnnl_success) return st;
    const dnnl_memory_desc_t *smd;
    size_t rs = pd_scratch(rpd, &smd);
    if (rs > *pad) *pad = rs;
    if (rs) st = dnnl_memory_create(&op->reorder_scratch[j], smd, eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success) st = dnnl_primitive_create(&op->reorder[j], rpd);
    dnnl_primitive_desc_destroy(rpd);
    if (st == dnnl_success) st = dnnl_memory_create(&op->inner[j], want, eng, DNNL_MEMORY_NONE);
    *inner_bytes = dnnl_memory_desc_get_size(want);
    return st;
}

sn_status sn_dnnl_op_init(sn_dnnl_op *op, const_dnnl_primitive_desc_t pd, const int arg[3],
                          const dnnl_memory_desc_t *const user[3], size_t *scratch_bytes) {
    memset(op, 0, sizeof *op);
    *scratch_bytes = 0;
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));
    dnnl_primitive_attr_t attr;
    SN_TRY(sn_dnnl_attr_user_scratchpad(&attr));
    const dnnl_memory_desc_t *smd;
    size_t pad = pd_scratch(pd, &smd), inner_bytes[3] = {0, 0, 0};
    dnnl_status_t st = dnnl_success;
    const char *what = "dnnl_memory_create(scratchpad)";
    if (pad) st = dnnl_memory_create(&op->scratch, smd, eng, DNNL_MEMORY_NONE);
    if (st == dnnl_success) {
        what = "dnnl_primitive_create";
        st = dnnl_primitive_create(&op->prim, pd);
    }
    for (int j = 0; j < 3 && st == dnnl_success; j++) {
        op->arg[j] = arg[j];
        what = "dnnl_memory_create(operand)";
        st = dnnl_memory_create(&op->user[j], user[j], eng, DNNL_MEMORY_NONE);
        if (st != dnnl_success) break;
        what = "dnnl_primitive_desc_query_md(exec_arg_md)";
        const dnnl_memory_desc_t *want =
            dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, arg[j]);
        if (!want) {
            st = dnnl_invalid_arguments;
            break;
        }
        what = "reorder of an operand to or from the primitive's layout";
        st = add_reorder(op, j, user[j], want, eng, attr, &pad, &inner_bytes[j]);
    }
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        sn_dnnl_op_destroy(op);
        return sn_dnnl_error(st, what, __FILE__, __LINE__);
    }
    size_t off = round64(pad);
    for (int j = 0; j < 3; j++) {
        if (!op->inner[j]) continue;
        op->inner_off[j] = off;
        off += round64(inner_bytes[j]);
    }
    *scratch_bytes = off;
    return SN_OK;
}

sn_status sn_dnnl_conv_op_init(sn_dnnl_op *op, const_dnnl_primitive_desc_t pd, sn_op kind,
                               const dnnl_memory_desc_t *xu, const dnnl_memory_desc_t *wu,
                               const dnnl_memory_desc_t *yu, size_t *scratch_bytes) {
    int arg[3];
    const dnnl_memory_desc_t *user[3];
    switch (kind) {
    case SN_OP_CONV2D:
        arg[0] = DNNL_ARG_SRC, arg[1] = DNNL_ARG_WEIGHTS, arg[2] = DNNL_ARG_DST;
        user[0] = xu, user[1] = wu, user[2] = yu;
        break;
    case SN_OP_CONV2D_BWD_DATA:
        arg[0] = DNNL_ARG_DIFF_DST, arg[1] = DNNL_ARG_WEIGHTS, arg[2] = DNNL_ARG_DIFF_SRC;
        user[0] = yu, user[1] = wu, user[2] = xu;
        break;
    default: /* SN_OP_CONV2D_BWD_FILTER */
        arg[0] = DNNL_ARG_SRC, arg[1] = DNNL_ARG_DIFF_DST, arg[2] = DNNL_ARG_DIFF_WEIGHTS;
        user[0] = xu, user[1] = yu, user[2] = wu;
        break;
    }
    return sn_dnnl_op_init(op, pd, arg, user, scratch_bytes);
}

static sn_status exec_reorder(sn_dnnl_op *op, int j, dnnl_stream_t stream, dnnl_memory_t from,
                              dnnl_memory_t to) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to},
                               {DNNL_ARG_SCRATCHPAD, op->reorder_scratch[j]}};
    SN_DNNL_CHECK(
        dnnl_primitive_execute(op->reorder[j], stream, op->reorder_scratch[j] ? 3 : 2, args));
    return SN_OK;
}

sn_status sn_dnnl_op_add_bias(sn_dnnl_op *op, int64_t f) {
    dnnl_engine_t eng;
    SN_TRY(sn_dnnl_engine(&eng));
    dnnl_memory_desc_t md;
    dnnl_dims_t d = {f};
    SN_DNNL_CHECK(dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_f32, dnnl_a));
    SN_DNNL_CHECK(dnnl_memory_create(&op->bias, &md, eng, DNNL_MEMORY_NONE));
    return SN_OK;
}

sn_status sn_dnnl_op_run(sn_dnnl_op *op, const void *in0, const void *in1, void *out,
                         void *scratch) {
    return sn_dnnl_op_run_bias(op, in0, in1, NULL, out, scratch);
}

sn_status sn_dnnl_op_run_bias(sn_dnnl_op *op, const void *in0, const void *in1, const void *bias,
                              void *out, void *scratch) {
    dnnl_stream_t stream;
    SN_TRY(sn_dnnl_stream(&stream));
    void *ptr[3] = {(void *)in0, (void *)in1, out};
    unsigned char *sc = scratch;
    dnnl_exec_arg_t args[5];
    int nargs = 0;
    if (op->bias) {
        SN_DNNL_CHECK(dnnl_memory_set_data_handle(op->bias, (void *)bias));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, op->bias};
    }
    for (int j = 0; j < 3; j++) {
        SN_DNNL_CHECK(dnnl_memory_set_data_handle(op->user[j], ptr[j]));
        if (op->inner[j])
            SN_DNNL_CHECK(dnnl_memory_set_data_handle(op->inner[j], sc + op->inner_off[j]));
        if (op->reorder_scratch[j])
            SN_DNNL_CHECK(dnnl_memory_set_data_handle(op->reorder_scratch[j], sc));
        if (j < 2 && op->reorder[j]) SN_TRY(exec_reorder(op, j, stream, op->user[j], op->inner[j]));
        args[nargs++] = (dnnl_exec_arg_t){op->arg[j], op->inner[j] ? op->inner[j] : op->user[j]};
    }
    if (op->scratch) {
        SN_DNNL_CHECK(dnnl_memory_set_data_handle(op->scratch, sc));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, op->scratch};
    }
    SN_DNNL_CHECK(dnnl_primitive_execute(op->prim, stream, nargs, args));
    if (op->reorder[2]) SN_TRY(exec_reorder(op, 2, stream, op->inner[2], op->user[2]));
    return SN_OK;
}

#else
/* ISO C forbids an empty translation unit. */
typedef int sn_dnnl_util_unused;
#endif
