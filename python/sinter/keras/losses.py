"""keras.losses: the losses sinter computes (nn.h's sn_loss_type)."""

SPARSE_CCE, CCE, BCE, MSE, MAE, HUBER = range(6)


class Loss:
    _type = None

    def __init__(self, from_logits=False, reduction="sum_over_batch_size", name=None, **kw):
        if reduction not in ("sum_over_batch_size", "auto", None):
            raise NotImplementedError(f"{type(self).__name__}: reduction={reduction!r}; sinter "
                                      "supports 'sum_over_batch_size'")
        for k, v in kw.items():
            if k in ("ignore_class", "axis") and v in (None, -1):
                continue
            if k == "label_smoothing" and v == 0:
                continue
            raise NotImplementedError(f"{type(self).__name__}: {k}={v!r} is not implemented "
                                      "in sinter")
        self.from_logits = bool(from_logits)
        self.name = name


class SparseCategoricalCrossentropy(Loss):
    _type = SPARSE_CCE


class CategoricalCrossentropy(Loss):
    _type = CCE


class BinaryCrossentropy(Loss):
    _type = BCE


class MeanSquaredError(Loss):
    _type = MSE

    def __init__(self, reduction="sum_over_batch_size", name="mean_squared_error"):
        super().__init__(False, reduction, name)


class MeanAbsoluteError(Loss):
    _type = MAE

    def __init__(self, reduction="sum_over_batch_size", name="mean_absolute_error"):
        super().__init__(False, reduction, name)


class Huber(Loss):
    _type = HUBER

    def __init__(self, delta=1.0, reduction="sum_over_batch_size", name="huber_loss"):
        super().__init__(False, reduction, name)
        self.delta = float(delta)


_BY_NAME = {
    "sparse_categorical_crossentropy": SparseCategoricalCrossentropy,
    "categorical_crossentropy": CategoricalCrossentropy,
    "binary_crossentropy": BinaryCrossentropy,
    "mean_squared_error": MeanSquaredError, "mse": MeanSquaredError,
    "mean_absolute_error": MeanAbsoluteError, "mae": MeanAbsoluteError,
    "huber": Huber,
}


def get(identifier):
    """A name (from_logits=False, as Keras's string losses) or a Loss object."""
    if isinstance(identifier, Loss):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Loss):
        return identifier()
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    raise NotImplementedError(f"loss {identifier!r}: sinter has " + ", ".join(sorted(_BY_NAME)))


def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1,
                                   ignore_class=None):
    """The per-example loss as a tensor (eager or inside a sinter.function; issue 25)."""
    if axis != -1 or ignore_class is not None:
        raise NotImplementedError("sparse_categorical_crossentropy: axis=-1 and no "
                                  "ignore_class in sinter")
    from .._function import sparse_categorical_crossentropy as f
    return f(y_true, y_pred, from_logits=from_logits)


def categorical_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0,
                             axis=-1):
    if label_smoothing or axis != -1:
        raise NotImplementedError("categorical_crossentropy: label_smoothing and axis in sinter")
    from .._function import categorical_crossentropy as f
    return f(y_true, y_pred, from_logits=from_logits)


def binary_crossentropy(y_true, y_pred, from_logits=False, label_smoothing=0.0, axis=-1):
    if label_smoothing or axis != -1:
        raise NotImplementedError("binary_crossentropy: label_smoothing and axis in sinter")
    from .._function import binary_crossentropy as f
    return f(y_true, y_pred, from_logits=from_logits)


def mean_squared_error(y_true, y_pred):
    from .._function import mean_squared_error as f
    return f(y_true, y_pred)


mse = mean_squared_error


def _loss_call(self, y_true, y_pred, sample_weight=None):
    from .. import _tensor
    if sample_weight is not None:
        raise NotImplementedError(f"calling {type(self).__name__} with sample_weight in sinter")
    if type(self) is MeanSquaredError:
        per = mean_squared_error(y_true, y_pred)
    else:
        f = {SparseCategoricalCrossentropy: sparse_categorical_crossentropy,
             CategoricalCrossentropy: categorical_crossentropy,
             BinaryCrossentropy: binary_crossentropy}[type(self)]
        per = f(y_true, y_pred, from_logits=self.from_logits)
    return _tensor.reduce_mean(per)


Loss.__call__ = _loss_call
