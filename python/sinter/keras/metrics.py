"""keras.metrics: accuracy (resolved by the loss, as Keras's "accuracy") and
sparse_categorical_accuracy (nn.h's sn_metric_type)."""

SPARSE_CATEGORICAL_ACCURACY, ACCURACY, BINARY_ACCURACY, CATEGORICAL_ACCURACY = range(4)


class Metric:
    """A metric object (compile's metrics=[...]) and, for a custom loop, a stateful metric:
    update_state adds to its variables (assign nodes inside a sinter.function), result()
    reads them, reset_state() zeroes them (issue 25)."""

    def __init__(self, name=None, dtype=None):
        self.name = name or self._default_name
        self.dtype = dtype
        self._state = None

    def _vars(self):
        if self._state is None:
            from .._function import Variable
            import numpy as np
            self._state = (Variable(np.float32(0), trainable=False, name=f"{self.name}_total"),
                           Variable(np.float32(0), trainable=False, name=f"{self.name}_count"))
        return self._state

    def _update(self, total, count):
        t, c = self._vars()
        t.assign_add(total)
        c.assign_add(count)

    def result(self):
        from .. import _tensor
        import numpy as np
        t, c = self._vars()
        tv, cv = np.float32(t.numpy()), np.float32(c.numpy())
        return _tensor.EagerTensor(np.float32(tv / cv if cv else 0.0), _tensor.float32)

    def reset_state(self):
        for v in self._vars():
            v.assign(0.0)

    reset_states = reset_state

    @property
    def variables(self):
        return list(self._vars())


class Mean(Metric):
    _default_name = "mean"

    def update_state(self, values, sample_weight=None):
        from .. import _tensor
        if sample_weight is not None:
            raise NotImplementedError("Mean.update_state(sample_weight=...) in sinter")
        values = values if _tensor.is_tensor(values) else _tensor.convert_to_tensor(
            values, _tensor.float32)
        n = 1
        for d in values.shape:
            n *= int(d)
        self._update(_tensor.reduce_sum(values), float(n))


class SparseCategoricalAccuracy(Metric):
    _default_name = "sparse_categorical_accuracy"
    _type = SPARSE_CATEGORICAL_ACCURACY

    def update_state(self, y_true, y_pred, sample_weight=None):
        from .. import _function, _tensor
        if sample_weight is not None:
            raise NotImplementedError("SparseCategoricalAccuracy.update_state(sample_weight=...)"
                                      " in sinter")
        y_pred = y_pred if _tensor.is_tensor(y_pred) else _tensor.convert_to_tensor(
            y_pred, _tensor.float32)
        hits = _function.sparse_accuracy(y_true, y_pred)
        self._update(_tensor.reduce_sum(hits), float(y_pred.shape[0]))


def get(identifier):
    """-> (type, the name Keras logs). keras.metrics.Accuracy (exact equality) is not the
    "accuracy" string and is not offered."""
    if isinstance(identifier, Metric):
        if identifier.name != identifier._default_name:
            raise NotImplementedError(f"metric name {identifier.name!r}: sinter logs metrics "
                                      "under their Keras names")
        return identifier._type, identifier.name
    if identifier in ("accuracy", "acc"):
        return ACCURACY, "accuracy"
    if identifier == "sparse_categorical_accuracy":
        return SPARSE_CATEGORICAL_ACCURACY, identifier
    if identifier == "binary_accuracy":  # threshold 0.5 (sn_compile_opts.accuracy_threshold)
        return BINARY_ACCURACY, identifier
    if identifier == "categorical_accuracy":
        return CATEGORICAL_ACCURACY, identifier
    raise NotImplementedError(f"metric {identifier!r}: sinter has 'accuracy', "
                              "'sparse_categorical_accuracy', 'binary_accuracy' and "
                              "'categorical_accuracy'")
