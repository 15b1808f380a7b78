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
GlorotUniform = _cls("GlorotUniform", seed=None)
GlorotNormal = _cls("GlorotNormal", seed=None)
HeUniform = _cls("HeUniform", seed=None)
HeNormal = _cls("HeNormal", seed=None)
LecunUniform = _cls("LecunUniform", seed=None)
LecunNormal = _cls("LecunNormal", seed=None)
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
        # Keras's short aliases (Embedding's default is "uniform")
        return {"uniform": "random_uniform", "normal": "random_normal"}.get(init, init)
    if isinstance(init, Initializer):
        return init._serialize()
    if isinstance(init, dict):
        return init
    raise NotImplementedError(f"initializer {init!r}: sinter supports Keras's built-in "
                              "initializers (a custom one is not supported)")
