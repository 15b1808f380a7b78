"""keras.optimizers: SGD, Adam, AdamW, RMSprop with Keras's arguments and defaults (nn.h's
sn_optimizer_opts). A learning_rate may be a schedule (keras.optimizers.schedules), which
fit applies step by step through the C schedule callback."""
from .. import _lib
from . import schedules  # noqa: F401  (keras.optimizers.schedules)

SN_SGD, SN_ADAM, SN_ADAMW, SN_RMSPROP = range(4)


class Optimizer:
    _type = None
    _unsupported = ("clipnorm", "clipvalue", "global_clipnorm", "use_ema",
                    "loss_scale_factor", "gradient_accumulation_steps")

    def __init__(self, learning_rate, name=None, **kwargs):
        for k, v in kwargs.items():
            if k not in self._unsupported and k not in ("ema_momentum",
                                                        "ema_overwrite_frequency"):
                raise TypeError(f"{type(self).__name__}: unexpected argument {k!r}")
            if k in self._unsupported and v not in (None, False):
                raise NotImplementedError(f"{type(self).__name__}: {k}={v!r} is not "
                                          "implemented in sinter")
        self.learning_rate = learning_rate
        self.name = name or type(self).__name__.lower()

    def _opts(self):
        o = _lib.lib.sn_optimizer_defaults(self._type)
        lr = self.learning_rate
        o.learning_rate = float(lr.initial_learning_rate if isinstance(
            lr, schedules.LearningRateSchedule) else lr)
        self._fill(o)
        return o

    def _fill(self, o):
        pass

    def get_config(self):
        return {"name": self.name, "learning_rate": self.learning_rate}

    # a custom training loop (issue 25): inside a sinter.function
    @property
    def iterations(self):
        from .. import _function
        return _function.optimizer_iterations(self)

    def apply_gradients(self, grads_and_vars, name=None, **kwargs):
        from .. import _function
        return _function.apply_gradients(self, list(grads_and_vars))


class SGD(Optimizer):
    _type = SN_SGD

    def __init__(self, learning_rate=0.01, momentum=0.0, nesterov=False, weight_decay=None,
                 **kwargs):
        if weight_decay:
            raise NotImplementedError("SGD: weight_decay is not implemented in sinter (AdamW "
                                      "has it)")
        super().__init__(learning_rate, **kwargs)
        self.momentum, self.nesterov = momentum, nesterov

    def _fill(self, o):
        o.momentum, o.nesterov = self.momentum, self.nesterov


class Adam(Optimizer):
    _type = SN_ADAM

    def __init__(self, learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
                 amsgrad=False, weight_decay=None, **kwargs):
        if amsgrad or weight_decay:
            raise NotImplementedError("Adam: amsgrad and weight_decay are not implemented in "
                                      "sinter (AdamW has decoupled weight decay)")
        super().__init__(learning_rate, **kwargs)
        self.beta_1, self.beta_2, self.epsilon = beta_1, beta_2, epsilon

    def _fill(self, o):
        o.beta_1, o.beta_2, o.epsilon = self.beta_1, self.beta_2, self.epsilon


class AdamW(Adam):
    _type = SN_ADAMW

    def __init__(self, learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-7, amsgrad=False, **kwargs):
        super().__init__(learning_rate, beta_1, beta_2, epsilon, amsgrad, **kwargs)
        self.weight_decay = weight_decay

    def _fill(self, o):
        super()._fill(o)
        o.weight_decay = self.weight_decay


class RMSprop(Optimizer):
    _type = SN_RMSPROP

    def __init__(self, learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7,
                 centered=False, weight_decay=None, **kwargs):
        if centered or weight_decay:
            raise NotImplementedError("RMSprop: centered and weight_decay are not implemented "
                                      "in sinter")
        super().__init__(learning_rate, **kwargs)
        self.rho, self.momentum, self.epsilon = rho, momentum, epsilon

    def _fill(self, o):
        o.rho, o.momentum, o.epsilon = self.rho, self.momentum, self.epsilon


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW, "rmsprop": RMSprop}


def get(identifier):
    if isinstance(identifier, Optimizer):
        return identifier
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    raise ValueError(f"optimizer {identifier!r}: sinter has {', '.join(sorted(_BY_NAME))} "
                     "(or an object of keras.optimizers)")
