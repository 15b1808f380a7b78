"""keras.initializers: classes that serialise to the configs Keras writes; the C reader
(sn_cfg_initializer) draws the values from sinter's seeded RNG."""


class Initializer:
    def __init__(self, **config):
        self._config = config

    def get_config(self):
        return dict(self._config)

    def _serialize(self):
        return {"module": "keras.initializers", "class_name": type(self).__name__,
                "config": self.get_config(), "registered_name": None}


def _cls(name, **defaults):
    def __init__(self, *args, **kwargs):
        keys = list(defaults)
        if len(args) > len(keys):
            raise TypeError(f"{name} takes at most {len(keys)} positional arguments")
        c = dict(defaults)
        c.update(zip(keys, args))
        for k in kwargs:
            if k not in c:
                raise TypeError(f"{name}: unexpected argument {k!r}")
        c.update(kwargs)
        Initializer.__init__(self, **c)
    return type(name, (Initializer,), {"__init__": __init__})


Zeros = _cls("Zeros")
Ones = _cls("Ones")
Constant = _cls("Constant", value=0.0)
GlorotUniform = _cls("GlorotUniform", seed=None, input_axes=None, output_axes=None)
GlorotNormal = _cls("GlorotNormal", seed=None, input_axes=None, output_axes=None)
HeUniform = _cls("HeUniform", seed=None, input_axes=None, output_axes=None)
HeNormal = _cls("HeNormal", seed=None, input_axes=None, output_axes=None)
LecunUniform = _cls("LecunUniform", seed=None, input_axes=None, output_axes=None)
LecunNormal = _cls("LecunNormal", seed=None, input_axes=None, output_axes=None)
RandomUniform = _cls("RandomUniform", minval=-0.05, maxval=0.05, seed=None)
RandomNormal = _cls("RandomNormal", mean=0.0, stddev=0.05, seed=None)
TruncatedNormal = _cls("TruncatedNormal", mean=0.0, stddev=0.05, seed=None)
Orthogonal = _cls("Orthogonal", gain=1.0, seed=None)

zeros, ones, constant = Zeros, Ones, Constant
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
he_uniform, he_normal, lecun_uniform, lecun_normal = HeUniform, HeNormal, LecunUniform, LecunNormal
random_uniform, random_normal, truncated_normal = RandomUniform, RandomNormal, TruncatedNormal
orthogonal = Orthogonal


def serialize(init):
    """A name (passed on: the C reader knows Keras's names) or an Initializer."""
    if init is None:
        return init
    if isinstance(init, str):
        # As Keras's get_config: the name becomes the class's full config (Keras's short
        # aliases too: Embedding's default is "uniform"). A name not listed is passed on for
        # the C reader to accept or refuse by name.
        name = {"uniform": "random_uniform", "normal": "random_normal"}.get(init, init)
        cls = _BY_NAME.get(name.lower().replace("_", ""))
        return cls()._serialize() if cls is not None else name
    if isinstance(init, Initializer):
        return init._serialize()
    if isinstance(init, dict):
        return init
    raise NotImplementedError(f"initializer {init!r}: sinter supports Keras's built-in "
                              "initializers (a custom one is not supported)")


_BY_NAME = {c.__name__.lower(): c for c in (
    Zeros, Ones, GlorotUniform, GlorotNormal, HeUniform, HeNormal, LecunUniform, LecunNormal,
    RandomUniform, RandomNormal, TruncatedNormal, Orthogonal)}
