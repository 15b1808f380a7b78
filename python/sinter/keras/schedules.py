"""keras.optimizers.schedules: ExponentialDecay, PiecewiseConstantDecay, CosineDecay, with
Keras's formulas computed by C (sn_lr_schedule_value)."""
from .. import _lib

SN_LR_EXPONENTIAL_DECAY, SN_LR_PIECEWISE_CONSTANT_DECAY, SN_LR_COSINE_DECAY = range(3)


class LearningRateSchedule:
    def _struct(self):
        s = _lib.LRSchedule()
        self._fill(s)
        _lib.check(_lib.lib.sn_lr_schedule_check(s), type(self).__name__)
        return s

    def __call__(self, step):
        return _lib.lib.sn_lr_schedule_value(self._struct(), int(step))


class ExponentialDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, decay_rate, staircase=False,
                 name="ExponentialDecay"):
        self.initial_learning_rate, self.decay_steps = initial_learning_rate, decay_steps
        self.decay_rate, self.staircase = decay_rate, staircase

    def _fill(self, s):
        s.type = SN_LR_EXPONENTIAL_DECAY
        s.initial_learning_rate = self.initial_learning_rate
        s.decay_steps, s.decay_rate, s.staircase = self.decay_steps, self.decay_rate, \
            self.staircase


class PiecewiseConstantDecay(LearningRateSchedule):
    def __init__(self, boundaries, values, name="PiecewiseConstant"):
        if len(values) != len(boundaries) + 1:
            raise ValueError("PiecewiseConstantDecay: values must have one more entry than "
                             f"boundaries; got {len(values)} and {len(boundaries)}")
        if len(boundaries) > _lib.SN_LR_MAX_BOUNDARIES:
            raise ValueError(f"PiecewiseConstantDecay: at most {_lib.SN_LR_MAX_BOUNDARIES} "
                             f"boundaries in sinter; got {len(boundaries)}")
        self.boundaries, self.values = list(boundaries), list(values)
        self.initial_learning_rate = values[0]

    def _fill(self, s):
        s.type = SN_LR_PIECEWISE_CONSTANT_DECAY
        s.initial_learning_rate = self.values[0]
        s.n_boundaries = len(self.boundaries)
        for i, b in enumerate(self.boundaries):
            s.boundaries[i] = int(b)
        for i, v in enumerate(self.values):
            s.values[i] = float(v)


class CosineDecay(LearningRateSchedule):
    def __init__(self, initial_learning_rate, decay_steps, alpha=0.0, name="CosineDecay",
                 warmup_target=None, warmup_steps=0):
        self.initial_learning_rate, self.decay_steps, self.alpha = \
            initial_learning_rate, decay_steps, alpha
        self.warmup_target, self.warmup_steps = warmup_target, warmup_steps

    def _fill(self, s):
        s.type = SN_LR_COSINE_DECAY
        s.initial_learning_rate = self.initial_learning_rate
        s.decay_steps, s.alpha, s.warmup_steps = self.decay_steps, self.alpha, self.warmup_steps
        s.warmup_target = self.warmup_target if self.warmup_target is not None else 0.0
