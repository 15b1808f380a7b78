/* oneDNN engine/stream singletons and error translation (see dnnl_util.h). */
#ifdef SN_HAVE_DNNL

#include "backend/cpu/dnnl_util.h"

#include <dnnl_debug.h>
#include <pthread.h>

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

#else
/* ISO C forbids an empty translation unit. */
typedef int sn_dnnl_util_unused;
#endif
