"""keras.metrics: accuracy (resolved by the loss, as Keras's "accuracy") and
sparse_categorical_accuracy (nn.h's sn_metric_type)."""

SPARSE_CATEGORICAL_ACCURACY, ACCURACY = range(2)


class Metric:
    def __init__(self, name=None, dtype=None):
        self.name = name or self._default_name


class SparseCategoricalAccuracy(Metric):
    _default_name = "sparse_categorical_accuracy"
    _type = SPARSE_CATEGORICAL_ACCURACY


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
    raise NotImplementedError(f"metric {identifier!r}: sinter has 'accuracy' and "
                              "'sparse_categorical_accuracy'")
