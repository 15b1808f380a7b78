/* Prediction into the caller's buffers, for a server that runs many small batches: once the
 * plan for a batch size is prepared, a call copies the rows in, runs the plan and copies the
 * rows out, allocating nothing. */
#include <string.h>

#include "nn/train/train_impl.h"

sn_shape sn_model_input_shape(const sn_model *m) {
    return m ? m->input_shape : (sn_shape){0};
}

sn_shape sn_model_output_shape(const sn_model *m) {
    return m ? sn_model_out_shape(m) : (sn_shape){0};
}

static sn_status predict_plan(sn_model *m, int64_t batch, const char *what, sn_cached_plan **cp) {
    if (!m) return sn_errorf(SN_ERR_INVALID, "%s: NULL model", what);
    if (!m->built)
        return sn_errorf(SN_ERR_STATE, "%s: model '%s' is not built; call sn_model_build first",
                         what, m->name ? m->name : "");
    if (m->dtype != SN_F32)
        return sn_errorf(SN_ERR_UNSUPPORTED, "%s: model '%s' has %s variables (expected f32)",
                         what, m->name ? m->name : "", sn_dtype_name(m->dtype));
    if (batch < 1)
        return sn_errorf(SN_ERR_INVALID, "%s: batch %lld (expected >= 1)", what, (long long)batch);
    return sn_error_context(sn_train_plan(m, SN_PLAN_PREDICT, batch, NULL, SN_F32, cp), "%s", what);
}

sn_status sn_model_predict_prepare(sn_model *m, int64_t batch) {
    sn_cached_plan *cp;
    return predict_plan(m, batch, "predict_prepare", &cp);
}

sn_status sn_model_predict_into(sn_model *m, int64_t batch, const float *x, float *out) {
    if (!x || !out) return sn_errorf(SN_ERR_INVALID, "predict_into: NULL %s", !x ? "x" : "out");
    sn_cached_plan *cp;
    SN_TRY(predict_plan(m, batch, "predict_into", &cp));
    size_t in_bytes = (size_t)(batch * sn_shape_numel(&m->input_shape)) * sizeof(float);
    SN_TRY(sn_plan_set_input(cp->plan, cp->x, x, in_bytes));
    SN_TRY(sn_error_context(sn_plan_run(cp->plan, 1, NULL, NULL), "predict_into"));
    const float *res = sn_plan_buffer(cp->plan, cp->out);
    if (!res) return SN_ERR_INVALID;
    sn_shape os = sn_model_out_shape(m);
    memcpy(out, res, (size_t)(batch * sn_shape_numel(&os)) * sizeof(float));
    return SN_OK;
}
