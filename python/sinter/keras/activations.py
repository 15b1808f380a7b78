"""keras.activations: the names sinter's layers take (nn.h's sn_activation). The functions
exist so that `activation=keras.activations.relu` works as in Keras; they name an activation
for a layer and do not compute on arrays."""

_NAMES = ("linear", "relu", "sigmoid", "tanh", "softmax", "gelu", "silu", "swish", "elu",
          "leaky_relu", "relu6")


def _named(name):
    def f(x=None, *args, **kwargs):
        raise NotImplementedError(f"keras.activations.{name}: sinter's activations name a "
                                  "layer's activation; they do not compute on arrays")
    f.__name__ = name
    return f


for _n in _NAMES:
    globals()[_n] = _named(_n)


def serialize(activation):
    """None -> "linear"; a name or one of the functions above -> its name."""
    if activation is None:
        return "linear"
    if isinstance(activation, str):
        return activation
    name = getattr(activation, "__name__", None)
    if name in _NAMES:
        return name
    raise NotImplementedError(f"activation {activation!r}: sinter supports the activations "
                              f"named {', '.join(_NAMES)} (a custom function is not supported)")


def get(identifier):
    return identifier if callable(identifier) else globals()[serialize(identifier)]
