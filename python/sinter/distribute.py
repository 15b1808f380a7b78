"""tf.distribute over sinter's strategies (sinter/dist.h). A model made inside
`strategy.scope()` trains data parallel over the strategy's replicas (fit's batch_size is the
global batch, as in Keras); evaluation and prediction run on the first replica's device."""
import contextlib
import ctypes as C
import threading
import weakref

from . import _lib

_lib_ = _lib.lib
_local = threading.local()


def _stack():
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


def _current():
    s = _stack()
    return s[-1] if s else None


class Strategy:
    def __init__(self, handle):
        self._h = handle
        self._fin = weakref.finalize(self, _lib_.sn_strategy_free, handle)

    @property
    def num_replicas_in_sync(self):
        return int(_lib_.sn_strategy_num_replicas(self._h))

    @property
    def extended(self):
        return self

    @property
    def worker_devices(self):
        return tuple(_lib_.sn_strategy_replica_device(self._h, i).decode()
                     for i in range(_lib_.sn_strategy_local_replicas(self._h)))

    @contextlib.contextmanager
    def scope(self):
        _stack().append(self)
        try:
            yield self
        finally:
            _stack().pop()

    def __repr__(self):
        return (f"<{_lib_.sn_strategy_name(self._h).decode()} "
                f"replicas={self.num_replicas_in_sync}>")


class OneDeviceStrategy(Strategy):
    def __init__(self, device):
        h = C.c_void_p()
        _lib.check(_lib_.sn_strategy_one_device(device.encode() if device else None,
                                                C.byref(h)), "OneDeviceStrategy")
        super().__init__(h)


class MirroredStrategy(Strategy):
    def __init__(self, devices=None, cross_device_ops=None):
        h = C.c_void_p()
        if devices is None:
            _lib.check(_lib_.sn_strategy_mirrored(0, None, C.byref(h)), "MirroredStrategy")
        else:
            names = [d.encode() for d in devices]
            arr = (C.c_char_p * len(names))(*names)
            _lib.check(_lib_.sn_strategy_mirrored(len(names), arr, C.byref(h)),
                       "MirroredStrategy")
        super().__init__(h)


class MultiWorkerMirroredStrategy(Strategy):
    """Over MPI: run the script with `mpirun -np N python script.py`."""

    def __init__(self, cluster_resolver=None, communication_options=None):
        if cluster_resolver is not None:
            raise NotImplementedError("MultiWorkerMirroredStrategy: sinter takes the workers "
                                      "from MPI (mpirun), not a cluster resolver")
        h = C.c_void_p()
        _lib.check(_lib_.sn_strategy_multi_worker(0, C.byref(h)),
                   "MultiWorkerMirroredStrategy")
        super().__init__(h)


def get_strategy():
    return _current()


def has_strategy():
    return _current() is not None


# strategy.run, reduce, PerReplica and distributed datasets (issue 25)
from . import _distribute_run  # noqa: E402

_distribute_run.extend(Strategy)
PerReplica = _distribute_run.PerReplica
InputContext = _distribute_run.InputContext
InputOptions = _distribute_run.InputOptions
InputReplicationMode = _distribute_run.InputReplicationMode
ReduceOp = _distribute_run.ReduceOp
