"""keras.regularizers: L1, L2, L1L2 (nn.h's sn_regularizer)."""


class Regularizer:
    def get_config(self):
        return dict(self._config)

    def _serialize(self):
        return {"module": "keras.regularizers", "class_name": type(self).__name__,
                "config": self.get_config(), "registered_name": None}


class L1(Regularizer):
    def __init__(self, l1=0.01):
        self._config = {"l1": float(l1)}


class L2(Regularizer):
    def __init__(self, l2=0.01):
        self._config = {"l2": float(l2)}


class L1L2(Regularizer):
    def __init__(self, l1=0.0, l2=0.0):
        self._config = {"l1": float(l1), "l2": float(l2)}


l1, l2, l1_l2 = L1, L2, L1L2


def serialize(reg):
    if reg is None or isinstance(reg, dict):
        return reg
    if isinstance(reg, Regularizer):
        return reg._serialize()
    if isinstance(reg, str):
        return {"l1": L1(), "l2": L2(), "l1_l2": L1L2()}[reg.lower()]._serialize()
    raise NotImplementedError(f"regularizer {reg!r}: sinter supports L1, L2 and L1L2")
