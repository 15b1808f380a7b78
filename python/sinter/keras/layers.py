"""keras.layers: every layer class sinter's C side has.

A layer here holds only its Keras config (what `layer.get_config()` returns in Keras 3, the
same field names and defaults). The model turns the list of configs into the JSON Keras
itself writes and has the C reader (sn_model_from_json, src/nn/keras/model_config_layers.c) build
it, so names, defaults and the checks of what sinter supports live in C once: a value sinter
does not implement fails there with a message naming the layer, the field and the value.
"""

from . import _naming
from . import activations as _activations
from . import initializers as _initializers
from . import regularizers as _regularizers

_FLOAT32 = {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
            "registered_name": None}


def _pair(v, what):
    if isinstance(v, int):
        return [v, v]
    v = list(v)
    if len(v) != 2:
        raise ValueError(f"{what} must be an int or a tuple of 2 ints; got {v}")
    return [int(v[0]), int(v[1])]


def _sides_2d(v, what):
    """ZeroPadding2D's padding and Cropping2D's cropping as [[top, bottom], [left, right]]:
    Keras takes an int (all four sides), (a, b) (a top and bottom, b left and right) or
    ((top, bottom), (left, right))."""
    if isinstance(v, int):
        v = ((v, v), (v, v))
    return [_pair(p, what) for p in v]


def _dtype_policy(dtype):
    if dtype is None or dtype == "float32":
        return dict(_FLOAT32)
    if dtype == "mixed_bfloat16":
        return {"module": "keras", "class_name": "DTypePolicy",
                "config": {"name": "mixed_bfloat16"}, "registered_name": None}
    if isinstance(dtype, dict):
        return dtype
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": str(dtype)},
            "registered_name": None}


class Layer:
    """The base of every layer: name, trainable, dtype and the input-shape arguments Keras 3
    still accepts on a first layer (input_shape, batch_size, input_dim)."""

    _keras_class = None  # the class_name the C reader knows

    def __init__(self, name=None, trainable=True, dtype=None, input_shape=None, input_dim=None,
                 batch_size=None, batch_input_shape=None, **kwargs):
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unrecognized keyword arguments: "
                            f"{sorted(kwargs)}")
        cls = self._keras_class or type(self).__name__
        self.name = name if name is not None else _naming.unique(_naming.snake_case(cls))
        self.trainable = bool(trainable)
        self._dtype = dtype
        if batch_input_shape is not None:
            batch_size, input_shape = batch_input_shape[0], tuple(batch_input_shape[1:])
        if input_dim is not None and input_shape is None:
            input_shape = (int(input_dim),)
        self._input_shape = tuple(input_shape) if input_shape is not None else None
        self._batch_size = batch_size
        self._model = None  # (model, index) once a built model holds it

    # Keras's get_config: the common fields, then the layer's own.
    def get_config(self):
        c = {"name": self.name, "trainable": self.trainable,
             "dtype": _dtype_policy(self._dtype)}
        c.update(self._config())
        return c

    def _config(self):
        return {}

    # The entry the C reader gets; a layer sinter runs as another class (Softmax, ReLU as
    # Activation) says so here.
    def _serialize(self):
        return {"module": "keras.layers", "class_name": self._keras_class or type(self).__name__,
                "config": self.get_config(), "registered_name": None}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        return cls(**config)

    def get_weights(self):
        if self._model is None:
            return []
        model, i = self._model
        return model._layer_weights(i)

    def set_weights(self, weights):
        if self._model is None:
            raise ValueError(f"layer '{self.name}' is not built: it has no weights yet")
        model, i = self._model
        model._set_layer_weights(i, weights)

    @property
    def weights(self):
        return self.get_weights()

    def count_params(self):
        return int(sum(w.size for w in self.get_weights()))

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}>"


class InputLayer(Layer):
    def __init__(self, shape=None, batch_size=None, dtype=None, name=None, **kwargs):
        kwargs.pop("input_shape", None)
        super().__init__(name=name, dtype=dtype, **kwargs)
        self.shape = tuple(shape) if shape is not None else None
        self.batch_size = batch_size

    def _serialize(self):
        return {"module": "keras.layers", "class_name": "InputLayer",
                "config": {"batch_shape": [self.batch_size] + list(self.shape),
                           "dtype": self._dtype if isinstance(self._dtype, str) else "float32",
                           "sparse": False, "ragged": False,
                           "name": self.name, "optional": False},
                "registered_name": None}


def _inputs_of(t):
    """The tensors a call took: its positional ones, then its keyword tensors."""
    return list(t._args) + list(getattr(t, "_kwtensors", {}).values())


class KerasTensor:
    """A symbolic tensor of the Functional API: keras.Input's, or the output of a layer
    called on such tensors. It records the graph (which layer made it, at which of its calls,
    from which tensors); keras.Model(inputs, outputs) writes that graph as Keras's
    Functional config and the C reader builds it with the C Functional builder."""

    def __init__(self, shape, batch_size=None, name=None, dtype=None):
        if shape is None:
            raise ValueError("Input: shape is required")
        self._shape = (batch_size,) + tuple(shape)
        self.dtype = dtype or "float32"
        self._layer = InputLayer(shape=tuple(shape), batch_size=batch_size, name=name,
                                 dtype=dtype)
        self._call_index = 0
        self._args = []  # the tensors the producing call took (none for an input)
        self._kwtensors = {}

    @property
    def shape(self):
        """The shape with the batch (None): an input's as given; a layer output's from the C
        side, which builds the graph up to this tensor once to learn it."""
        if self._shape is None:
            from .models import _tensor_shape
            self._shape = _tensor_shape(self)
        return self._shape

    @property
    def name(self):
        return self._layer.name if not self._args else f"{self._layer.name}_{self._call_index}"

    def __repr__(self):
        return f"<KerasTensor shape={self.shape}, dtype={self.dtype}, name={self.name}>"


def Input(shape=None, batch_size=None, dtype=None, name=None, **kwargs):
    if kwargs.pop("batch_shape", None) is not None:
        raise NotImplementedError("Input(batch_shape=): give shape and batch_size")
    if kwargs:
        raise TypeError(f"Input: unrecognized keyword arguments: {sorted(kwargs)}")
    return KerasTensor(shape, batch_size=batch_size, name=name, dtype=dtype)


def _call(layer, x, unpack=False):
    """layer(x) on KerasTensors: one call of the Functional API. A list of tensors is a merge
    layer's call (or, with unpack, several positional arguments: mha(query, value)); calling a
    layer again shares its weights (Keras's shared layers)."""
    xs = list(x) if isinstance(x, (list, tuple)) else [x]
    if not xs or not all(isinstance(t, KerasTensor) for t in xs):
        raise TypeError(f"{layer.name}: called on {type(x).__name__}; sinter layers are called "
                        "on keras.Input tensors (or lists of them) to build a Functional "
                        "model (for numbers, use model.predict)")
    calls = layer.__dict__.setdefault("_calls", [])
    out = KerasTensor.__new__(KerasTensor)
    out._shape, out.dtype = None, xs[0].dtype
    out._layer, out._call_index = layer, len(calls)
    out._args = xs
    out._packed = isinstance(x, (list, tuple)) and not unpack  # merges take one list
    out._kwargs = {}  # the call's keyword arguments as Keras writes them (use_causal_mask)
    out._kwtensors = {}  # keyword arguments that are tensors (MultiHeadAttention's key, mask)
    calls.append(out)
    return out


def _training_kw(out, training):
    """A call's training= keyword, recorded as Keras records it (written into the config).
    Keras 3's fit, evaluate and predict override it with their own mode (functional.py's
    operation_fn), and so does sinter: it changes no computation."""
    if training is not None:
        out._kwargs["training"] = bool(training)
    return out


def _layer_call(self, x, training=None, mask=None, **kwargs):
    if kwargs or mask is not None:
        raise NotImplementedError(f"{self.name}: sinter calls layers on tensors alone (no mask "
                                  f"or {sorted(kwargs)})")
    return _training_kw(_call(self, x), training)


Layer.__call__ = _layer_call


class Dense(Layer):
    def __init__(self, units, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self.units = int(units)
        self.activation = _activations.serialize(activation)
        self.use_bias = use_bias
        self.kernel_initializer = _initializers.serialize(kernel_initializer)
        self.bias_initializer = _initializers.serialize(bias_initializer)
        self.kernel_regularizer = _regularizers.serialize(kernel_regularizer)
        self.bias_regularizer = _regularizers.serialize(bias_regularizer)
        self._nulls = {"activity_regularizer": activity_regularizer,
                       "kernel_constraint": kernel_constraint, "bias_constraint": bias_constraint}

    def _config(self):
        c = {"units": self.units, "activation": self.activation, "use_bias": self.use_bias,
             "kernel_initializer": self.kernel_initializer,
             "bias_initializer": self.bias_initializer,
             "kernel_regularizer": self.kernel_regularizer,
             "bias_regularizer": self.bias_regularizer}
        c.update(self._nulls)
        if c["activity_regularizer"] is None:  # Keras's Layer.get_config adds it only when set
            del c["activity_regularizer"]
        c["quantization_config"] = None
        return c


class Conv2D(Layer):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 data_format=None, dilation_rate=(1, 1), groups=1, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"filters": int(filters), "kernel_size": _pair(kernel_size, "kernel_size"),
                   "strides": _pair(strides, "strides"), "padding": padding,
                   "data_format": data_format or "channels_last",
                   "dilation_rate": _pair(dilation_rate, "dilation_rate"), "groups": groups,
                   "activation": _activations.serialize(activation), "use_bias": use_bias,
                   "kernel_initializer": _initializers.serialize(kernel_initializer),
                   "bias_initializer": _initializers.serialize(bias_initializer),
                   "kernel_regularizer": _regularizers.serialize(kernel_regularizer),
                   "bias_regularizer": _regularizers.serialize(bias_regularizer),
                   "activity_regularizer": activity_regularizer,
                   "kernel_constraint": kernel_constraint, "bias_constraint": bias_constraint}

    def _config(self):
        return dict(self._c)


class _Pool2D(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None,
                 **kwargs):
        super().__init__(**kwargs)
        pool = _pair(pool_size, "pool_size")
        self._c = {"pool_size": pool,
                   "padding": padding,
                   "strides": _pair(strides, "strides") if strides is not None else pool,
                   "data_format": data_format or "channels_last"}

    def _config(self):
        return dict(self._c)


class MaxPooling2D(_Pool2D):
    pass


class AveragePooling2D(_Pool2D):
    pass


MaxPool2D = MaxPooling2D
AvgPool2D = AveragePooling2D


class GlobalAveragePooling2D(Layer):
    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self._c = {"data_format": data_format or "channels_last", "keepdims": keepdims}

    def _config(self):
        return dict(self._c)


class GlobalMaxPooling2D(GlobalAveragePooling2D):
    pass


GlobalMaxPool2D = GlobalMaxPooling2D
GlobalAvgPool2D = GlobalAveragePooling2D


class Flatten(Layer):
    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format or "channels_last"

    def _config(self):
        return {"data_format": self.data_format}


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = [int(d) for d in target_shape]

    def _config(self):
        return {"target_shape": list(self.target_shape)}


class Dropout(Layer):
    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"rate": float(rate), "seed": seed, "noise_shape": noise_shape}

    def _config(self):
        return dict(self._c)


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = _activations.serialize(activation)

    def _config(self):
        return {"activation": self.activation}


class Softmax(Layer):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def _config(self):
        return {"axis": self.axis}


class ReLU(Layer):
    """keras.layers.ReLU; the C side runs plain relu, max_value 6 and a negative_slope in
    (0, 1) with threshold 0, and refuses other values naming the field."""

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        self._c = {"max_value": max_value, "negative_slope": negative_slope,
                   "threshold": threshold}

    def _config(self):
        return dict(self._c)


class LeakyReLU(Layer):
    def __init__(self, negative_slope=0.3, **kwargs):
        super().__init__(**kwargs)
        self.negative_slope = negative_slope

    def _config(self):
        return {"negative_slope": self.negative_slope}


class Rescaling(Layer):
    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self._c = {"scale": scale, "offset": offset}

    def _config(self):
        return dict(self._c)


class ZeroPadding2D(Layer):
    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"padding": _sides_2d(padding, "padding"),
                   "data_format": data_format or "channels_last"}

    def _config(self):
        return dict(self._c)


class _Merge(Layer):
    """Merge layers take a list of tensors: Add()([a, b])."""


class Add(_Merge):
    pass


class Subtract(_Merge):
    pass


class Multiply(_Merge):
    pass


class Average(_Merge):
    pass


class Maximum(_Merge):
    pass


class Minimum(_Merge):
    pass


class Concatenate(_Merge):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def _config(self):
        return {"axis": self.axis}


def add(inputs, **kwargs):
    return Add(**kwargs)(inputs)


def subtract(inputs, **kwargs):
    return Subtract(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)


def average(inputs, **kwargs):
    return Average(**kwargs)(inputs)


def maximum(inputs, **kwargs):
    return Maximum(**kwargs)(inputs)


def minimum(inputs, **kwargs):
    return Minimum(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)


class BatchNormalization(Layer):
    def __init__(self, axis=-1, momentum=0.99, epsilon=0.001, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 beta_regularizer=None, gamma_regularizer=None, beta_constraint=None,
                 gamma_constraint=None, synchronized=False, renorm=False,
                 renorm_clipping=None, renorm_momentum=0.99, **kwargs):
        super().__init__(**kwargs)
        self._c = {"axis": axis, "momentum": momentum, "epsilon": epsilon, "center": center,
                   "scale": scale,
                   "beta_initializer": _initializers.serialize(beta_initializer),
                   "gamma_initializer": _initializers.serialize(gamma_initializer),
                   "moving_mean_initializer": _initializers.serialize(moving_mean_initializer),
                   "moving_variance_initializer":
                       _initializers.serialize(moving_variance_initializer),
                   "beta_regularizer": _regularizers.serialize(beta_regularizer),
                   "gamma_regularizer": _regularizers.serialize(gamma_regularizer),
                   "beta_constraint": beta_constraint, "gamma_constraint": gamma_constraint,
                   "synchronized": synchronized, "renorm": renorm,
                   "renorm_clipping": renorm_clipping, "renorm_momentum": renorm_momentum}

    def _config(self):
        return dict(self._c)


class Embedding(Layer):
    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform",
                 embeddings_regularizer=None, embeddings_constraint=None, mask_zero=False,
                 **kwargs):
        kwargs.pop("input_length", None)  # Keras 2's argument, ignored by Keras 3 too
        super().__init__(**kwargs)
        self._c = {"input_dim": int(input_dim), "output_dim": int(output_dim),
                   "embeddings_initializer": _initializers.serialize(embeddings_initializer),
                   "embeddings_regularizer": _regularizers.serialize(embeddings_regularizer),
                   "activity_regularizer": None,
                   "embeddings_constraint": embeddings_constraint, "mask_zero": mask_zero,
                   "quantization_config": None}

    def _config(self):
        return dict(self._c)


class _RNN(Layer):
    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", kernel_regularizer=None, recurrent_regularizer=None,
                 bias_regularizer=None, activity_regularizer=None, kernel_constraint=None,
                 recurrent_constraint=None, bias_constraint=None, dropout=0.0,
                 recurrent_dropout=0.0, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False, seed=None, **kwargs):
        extra = {k: kwargs.pop(k) for k in ("unit_forget_bias", "reset_after", "use_cudnn")
                 if k in kwargs}
        super().__init__(**kwargs)
        self._c = {"units": int(units), "activation": _activations.serialize(activation),
                   "recurrent_activation": _activations.serialize(recurrent_activation),
                   "use_bias": use_bias,
                   "kernel_initializer": _initializers.serialize(kernel_initializer),
                   "recurrent_initializer": _initializers.serialize(recurrent_initializer),
                   "bias_initializer": _initializers.serialize(bias_initializer),
                   "kernel_regularizer": _regularizers.serialize(kernel_regularizer),
                   "recurrent_regularizer": _regularizers.serialize(recurrent_regularizer),
                   "bias_regularizer": _regularizers.serialize(bias_regularizer),
                   "activity_regularizer": activity_regularizer,
                   "kernel_constraint": kernel_constraint,
                   "recurrent_constraint": recurrent_constraint,
                   "bias_constraint": bias_constraint, "dropout": dropout,
                   "recurrent_dropout": recurrent_dropout, "return_sequences": return_sequences,
                   "return_state": return_state, "go_backwards": go_backwards,
                   "stateful": stateful, "unroll": unroll, "seed": seed}
        self._c.update(self._own(extra))

    def _config(self):
        return dict(self._c)


class LSTM(_RNN):
    def _own(self, extra):
        return {"unit_forget_bias": extra.get("unit_forget_bias", True)}


class GRU(_RNN):
    def _own(self, extra):
        return {"reset_after": extra.get("reset_after", True)}


def _tuple(v, n, what):
    """An int or a tuple of n ints, as Keras's conv and pool arguments take, as a list."""
    if isinstance(v, int):
        return [v] * n
    v = list(v)
    if len(v) != n:
        raise ValueError(f"{what} must be an int or a tuple of {n} ints; got {v}")
    return [int(e) for e in v]


def _kernel_bias(prefix, init, bias_init, reg, bias_reg, constraint, bias_constraint,
                 activity_regularizer):
    """The initializer/regularizer/constraint fields of a layer's kernel (named `prefix`, e.g.
    "kernel" or "depthwise") and bias, in Keras's config form."""
    return {f"{prefix}_initializer": _initializers.serialize(init),
            "bias_initializer": _initializers.serialize(bias_init),
            f"{prefix}_regularizer": _regularizers.serialize(reg),
            "bias_regularizer": _regularizers.serialize(bias_reg),
            "activity_regularizer": activity_regularizer,
            f"{prefix}_constraint": constraint, "bias_constraint": bias_constraint}


class _Configured(Layer):
    """A layer whose Keras config is one dict built in __init__."""

    def _config(self):
        return dict(self._c)


class Conv1D(_Configured):
    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"filters": int(filters), "kernel_size": _tuple(kernel_size, 1, "kernel_size"),
                   "strides": _tuple(strides, 1, "strides"), "padding": padding,
                   "data_format": data_format or "channels_last",
                   "dilation_rate": _tuple(dilation_rate, 1, "dilation_rate"), "groups": groups,
                   "activation": _activations.serialize(activation), "use_bias": use_bias}
        self._c.update(_kernel_bias("kernel", kernel_initializer, bias_initializer,
                                    kernel_regularizer, bias_regularizer, kernel_constraint,
                                    bias_constraint, activity_regularizer))


class DepthwiseConv2D(_Configured):
    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=(1, 1), activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 depthwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"depth_multiplier": int(depth_multiplier),
                   "kernel_size": _pair(kernel_size, "kernel_size"),
                   "strides": _pair(strides, "strides"), "padding": padding,
                   "data_format": data_format or "channels_last",
                   "dilation_rate": _pair(dilation_rate, "dilation_rate"),
                   "activation": _activations.serialize(activation), "use_bias": use_bias}
        self._c.update(_kernel_bias("depthwise", depthwise_initializer, bias_initializer,
                                    depthwise_regularizer, bias_regularizer,
                                    depthwise_constraint, bias_constraint,
                                    activity_regularizer))


class SeparableConv2D(_Configured):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None,
                 dilation_rate=(1, 1), depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", pointwise_initializer="glorot_uniform",
                 bias_initializer="zeros", depthwise_regularizer=None,
                 pointwise_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 depthwise_constraint=None, pointwise_constraint=None, bias_constraint=None,
                 **kwargs):
        super().__init__(**kwargs)
        self._c = {"depth_multiplier": int(depth_multiplier), "filters": int(filters),
                   "kernel_size": _pair(kernel_size, "kernel_size"),
                   "strides": _pair(strides, "strides"), "padding": padding,
                   "data_format": data_format or "channels_last",
                   "dilation_rate": _pair(dilation_rate, "dilation_rate"),
                   "activation": _activations.serialize(activation), "use_bias": use_bias,
                   "depthwise_initializer": _initializers.serialize(depthwise_initializer),
                   "pointwise_initializer": _initializers.serialize(pointwise_initializer),
                   "bias_initializer": _initializers.serialize(bias_initializer),
                   "depthwise_regularizer": _regularizers.serialize(depthwise_regularizer),
                   "pointwise_regularizer": _regularizers.serialize(pointwise_regularizer),
                   "bias_regularizer": _regularizers.serialize(bias_regularizer),
                   "activity_regularizer": activity_regularizer,
                   "depthwise_constraint": depthwise_constraint,
                   "pointwise_constraint": pointwise_constraint,
                   "bias_constraint": bias_constraint}


class Conv2DTranspose(_Configured):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid",
                 output_padding=None, data_format=None, dilation_rate=(1, 1), activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 kernel_regularizer=None, bias_regularizer=None, activity_regularizer=None,
                 kernel_constraint=None, bias_constraint=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"filters": int(filters), "kernel_size": _pair(kernel_size, "kernel_size"),
                   "strides": _pair(strides, "strides"), "padding": padding,
                   "output_padding": output_padding,
                   "data_format": data_format or "channels_last",
                   "dilation_rate": _pair(dilation_rate, "dilation_rate"),
                   "activation": _activations.serialize(activation), "use_bias": use_bias}
        self._c.update(_kernel_bias("kernel", kernel_initializer, bias_initializer,
                                    kernel_regularizer, bias_regularizer, kernel_constraint,
                                    bias_constraint, activity_regularizer))


class _Pool1D(_Configured):
    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        pool = _tuple(pool_size, 1, "pool_size")
        self._c = {"pool_size": pool, "padding": padding,
                   "strides": _tuple(strides, 1, "strides") if strides is not None else pool,
                   "data_format": data_format or "channels_last"}


class MaxPooling1D(_Pool1D):
    pass


class AveragePooling1D(_Pool1D):
    def __init__(self, pool_size, strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(pool_size, strides, padding, data_format, **kwargs)


class GlobalAveragePooling1D(GlobalAveragePooling2D):
    pass


class GlobalMaxPooling1D(GlobalAveragePooling2D):
    pass


MaxPool1D, AvgPool1D = MaxPooling1D, AveragePooling1D
GlobalMaxPool1D, GlobalAvgPool1D = GlobalMaxPooling1D, GlobalAveragePooling1D


class Cropping2D(_Configured):
    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"cropping": _sides_2d(cropping, "cropping"),
                   "data_format": data_format or "channels_last"}


class UpSampling2D(_Configured):
    def __init__(self, size=(2, 2), data_format=None, interpolation="nearest", **kwargs):
        super().__init__(**kwargs)
        self._c = {"size": _pair(size, "size"), "data_format": data_format or "channels_last",
                   "interpolation": interpolation}


class ELU(_Configured):
    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self._c = {"alpha": alpha}


class PReLU(_Configured):
    def __init__(self, alpha_initializer="Zeros", alpha_regularizer=None, alpha_constraint=None,
                 shared_axes=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"alpha_initializer": _initializers.serialize(alpha_initializer),
                   "alpha_regularizer": _regularizers.serialize(alpha_regularizer),
                   "alpha_constraint": alpha_constraint, "shared_axes": shared_axes}


class Permute(_Configured):
    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self._c = {"dims": [int(d) for d in dims]}


class LayerNormalization(_Configured):
    def __init__(self, axis=-1, epsilon=0.001, center=True, scale=True, rms_scaling=False,
                 beta_initializer="zeros", gamma_initializer="ones", beta_regularizer=None,
                 gamma_regularizer=None, beta_constraint=None, gamma_constraint=None,
                 **kwargs):
        super().__init__(**kwargs)
        self._c = {"axis": axis, "epsilon": epsilon, "center": center, "scale": scale,
                   "rms_scaling": rms_scaling,
                   "beta_initializer": _initializers.serialize(beta_initializer),
                   "gamma_initializer": _initializers.serialize(gamma_initializer),
                   "beta_regularizer": _regularizers.serialize(beta_regularizer),
                   "gamma_regularizer": _regularizers.serialize(gamma_regularizer),
                   "beta_constraint": beta_constraint, "gamma_constraint": gamma_constraint}


class MultiHeadAttention(_Configured):
    """keras.layers.MultiHeadAttention, called as mha(query, value[, key],
    use_causal_mask=...); the C reader says which calls and fields sinter runs."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", kernel_regularizer=None, bias_regularizer=None,
                 activity_regularizer=None, kernel_constraint=None, bias_constraint=None,
                 seed=None, use_gate=False, sliding_window=None, **kwargs):
        super().__init__(**kwargs)
        self._c = {"num_heads": int(num_heads), "key_dim": int(key_dim),
                   "value_dim": int(value_dim) if value_dim is not None else int(key_dim),
                   "dropout": dropout, "use_bias": use_bias, "use_gate": use_gate,
                   # Keras keeps an int as a 1-tuple, written [n]
                   "output_shape": (None if output_shape is None else
                                    (int(output_shape),) if isinstance(output_shape, int)
                                    else tuple(output_shape)),
                   "attention_axes": attention_axes,
                   "sliding_window": sliding_window,
                   "kernel_initializer": _initializers.serialize(kernel_initializer),
                   "bias_initializer": _initializers.serialize(bias_initializer),
                   "kernel_regularizer": _regularizers.serialize(kernel_regularizer),
                   "bias_regularizer": _regularizers.serialize(bias_regularizer),
                   "activity_regularizer": activity_regularizer,
                   "kernel_constraint": kernel_constraint, "bias_constraint": bias_constraint,
                   "seed": seed}

    _CALL_KW = ("key", "query_mask", "value_mask", "key_mask", "attention_mask",
                "return_attention_scores", "training", "use_causal_mask")

    def __call__(self, query, value, *args, **kw):
        """mha(query, value[, key], key=..., attention_mask=..., use_causal_mask=...). The call
        is written as Keras writes it: a key given positionally among the args, a key given
        by keyword among the kwargs, the keyword arguments in the order they were given
        (Keras 3 records the call's own kwargs)."""
        if len(args) > 1:
            raise TypeError(f"{self.name}: query, value and key are the positional arguments; "
                            "give the rest by keyword")
        for k in kw:
            if k not in self._CALL_KW:
                raise TypeError(f"{self.name}: unexpected keyword argument {k!r}")
        if args and kw.get("key") is not None:
            raise TypeError(f"{self.name}: key is given twice")
        for what in ("query_mask", "value_mask", "key_mask"):
            if kw.get(what) is not None:
                raise NotImplementedError(f"{self.name}: {what} is not supported (Keras "
                                          "derives it from an Embedding(mask_zero=True))")
        if kw.get("return_attention_scores"):
            raise NotImplementedError(f"{self.name}: return_attention_scores is not supported")
        out = _call(self, [query, value] + [a for a in args if a is not None], unpack=True)
        order = []
        for k, v in kw.items():
            if k in ("key", "attention_mask") and v is not None:
                if not isinstance(v, KerasTensor):
                    raise TypeError(f"{self.name}: {k} must be a keras.Input tensor or a "
                                    f"layer's output; got {type(v).__name__}")
                out._kwtensors[k] = v
                order.append(k)
            elif k == "use_causal_mask" and v:
                out._kwargs["use_causal_mask"] = True
                order.append(k)
            elif k == "training" and v is not None:
                _training_kw(out, v)
                order.append(k)
        out._kworder = order  # the keyword tensors are in call order too (_inputs_of)
        return out


class Bidirectional(Layer):
    """keras.layers.Bidirectional over an LSTM or GRU; the backward layer is the forward
    one's config with go_backwards, named as Keras names it."""

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None,
                 **kwargs):
        if weights is not None or backward_layer is not None:
            raise NotImplementedError("Bidirectional: weights= and backward_layer= are not "
                                      "supported")
        if not isinstance(layer, _RNN):
            raise TypeError(f"Bidirectional: layer must be an LSTM or GRU; got "
                            f"{type(layer).__name__}")
        super().__init__(**kwargs)
        self.merge_mode = merge_mode
        self.layer = layer

    def _config(self):
        def rnn(name, backwards):
            e = self.layer._serialize()
            cfg = dict(e["config"])
            cfg["name"], cfg["go_backwards"] = name, backwards
            # Keras's Bidirectional zeroes masked steps' outputs when it returns sequences
            cfg["zero_output_for_mask"] = bool(cfg.get("return_sequences"))
            return {"module": e["module"], "class_name": e["class_name"], "config": cfg,
                    "registered_name": None}
        base = self.layer.name
        return {"merge_mode": self.merge_mode, "layer": rnn(f"forward_{base}", False),
                "backward_layer": rnn(f"backward_{base}", True)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config.pop("dtype", None)
        config.pop("backward_layer", None)  # always the forward layer's mirror here
        layer = config.pop("layer")
        inner = dict(layer["config"])
        inner.pop("dtype", None)
        inner.pop("zero_output_for_mask", None)
        inner["name"] = inner["name"].split("forward_", 1)[-1]
        return cls(deserialize({"class_name": layer["class_name"], "config": inner}), **config)


class RawLayer(Layer):
    """A layer given by the entry a model's JSON holds for it (a model used as a layer)."""

    def __init__(self, entry):
        self._entry = entry
        self.name = entry["config"]["name"]
        self.trainable = entry["config"].get("trainable", True)
        self._dtype = None
        self._input_shape = self._batch_size = None
        self._model = None

    def get_config(self):
        return dict(self._entry["config"])

    def _serialize(self):
        return self._entry


# Names Keras's deserializer accepts for each class (for load paths that name classes).
_CLASSES = {c.__name__: c for c in (
    Dense, Conv2D, MaxPooling2D, AveragePooling2D, GlobalAveragePooling2D, Flatten, Reshape,
    Dropout, Activation, Softmax, ReLU, BatchNormalization, Embedding, LSTM, GRU, InputLayer,
    LeakyReLU, Rescaling, ZeroPadding2D, GlobalMaxPooling2D, Add, Subtract, Multiply, Average,
    Maximum, Minimum, Concatenate, Conv1D, DepthwiseConv2D, SeparableConv2D, Conv2DTranspose,
    MaxPooling1D, AveragePooling1D, GlobalAveragePooling1D, GlobalMaxPooling1D, Cropping2D,
    UpSampling2D, ELU, PReLU, Permute, LayerNormalization, MultiHeadAttention, Bidirectional)}


def deserialize(config):
    cls = _CLASSES.get(config.get("class_name"))
    if cls is None:
        raise NotImplementedError(f"layer class {config.get('class_name')!r}; sinter has "
                                  + ", ".join(sorted(_CLASSES)))
    return cls.from_config(config.get("config", {}))

