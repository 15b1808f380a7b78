"""strategy.run, PerReplica values, reduce and distributed datasets (issue 25).

Eagerly, strategy.run calls the function once per replica under that replica's device (a
sinter.function runs its plan there). Inside a traced sinter.function, each replica's call adds
its nodes to the one graph being traced. Over several CPU replicas (which share one copy of the
variables) each replica's nodes then become a plan of their own, run on the strategy's replica
threads exactly as fit runs its step (sinter/dist.h, sn_strategy_run_plans): the replicas'
gradients and assign_add deltas (a metric's update_state) meet in all-reduces, replica 0
applies optimizer.apply_gradients once with the sums, and a barrier ends every replica's step.
Otherwise (one replica, or replicas on GPUs) the replicas' steps run in one plan and
apply_gradients adds the replicas' gradients before one update. Either way the sum is taken
in replica order, as MirroredStrategy's all-reduce.
"""
import numpy as np

from . import _function, _tensor
from ._tensor import EagerTensor, lib as _lib


class ReduceOp:
    SUM = "SUM"
    MEAN = "MEAN"


class PerReplica:
    def __init__(self, values):
        self.values = tuple(values)
        self._values = self.values

    def __str__(self):
        return "%s:{\n%s\n}" % (type(self).__name__, ",\n".join(
            "  %d: %s" % (i, v) for i, v in enumerate(self.values)))

    def __repr__(self):
        return "%s:{\n%s\n}" % (type(self).__name__, ",\n".join(
            "  %d: %r" % (i, v) for i, v in enumerate(self.values)))


class InputReplicationMode:
    """Who gets a pipeline of distribute_datasets_from_function: each worker (the default:
    the worker's replicas take consecutive elements of its one dataset) or each replica."""
    PER_WORKER = "PER_WORKER"
    PER_REPLICA = "PER_REPLICA"


class InputOptions:
    """tf.distribute.InputOptions: only the replication mode changes what sinter does; the
    placement and buffer options are accepted (sinter feeds host memory to every replica)."""

    def __init__(self, experimental_fetch_to_device=None,
                 experimental_replication_mode=InputReplicationMode.PER_WORKER,
                 experimental_place_dataset_on_device=False,
                 experimental_per_replica_buffer_size=1):
        mode = getattr(experimental_replication_mode, "value", experimental_replication_mode)
        mode = str(mode).upper().split(".")[-1]
        if mode not in (InputReplicationMode.PER_WORKER, InputReplicationMode.PER_REPLICA):
            raise ValueError(f"InputOptions: experimental_replication_mode "
                             f"{experimental_replication_mode!r}; expected "
                             f"InputReplicationMode.PER_WORKER or PER_REPLICA")
        self.experimental_fetch_to_device = experimental_fetch_to_device
        self.experimental_replication_mode = mode
        self.experimental_place_dataset_on_device = experimental_place_dataset_on_device
        self.experimental_per_replica_buffer_size = experimental_per_replica_buffer_size


class InputContext:
    def __init__(self, num_input_pipelines=1, input_pipeline_id=0, num_replicas_in_sync=1):
        self.num_input_pipelines = num_input_pipelines
        self.input_pipeline_id = input_pipeline_id
        self.num_replicas_in_sync = num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size):
        if global_batch_size % self.num_replicas_in_sync:
            raise ValueError(f"the global batch size {global_batch_size} is not divisible by "
                             f"the {self.num_replicas_in_sync} replicas")
        return global_batch_size // self.num_replicas_in_sync


def _select(x, i):
    if isinstance(x, PerReplica):
        return x.values[i]
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(_select(v, i) for v in x)
    if isinstance(x, dict):
        return {k: _select(v, i) for k, v in x.items()}
    return x


def _regroup(results):
    if len(results) == 1:
        return results[0]
    r0 = results[0]
    if r0 is None:
        return None
    if isinstance(r0, (list, tuple)) and type(r0) in (list, tuple):
        return type(r0)(_regroup([r[j] for r in results]) for j in range(len(r0)))
    if isinstance(r0, dict):
        return {k: _regroup([r[k] for r in results]) for k in r0}
    return PerReplica(results)


def _replica_devices(strategy):
    return list(strategy.worker_devices)


def run(strategy, fn, args=(), kwargs=None, options=None):
    from . import distribute
    kwargs = kwargs or {}
    n = len(_replica_devices(strategy))
    ctx = _function.current_trace()
    results = []
    if ctx is not None and n > 1 and ctx.replica_strategy is None and ctx.replica is None and \
            not ctx.windows and _lib.sn_strategy_shares_variables(strategy._h):
        ctx.replica_strategy = strategy
    if ctx is not None and ctx.replica_strategy not in (None, strategy):
        raise NotImplementedError("strategy.run of two strategies in one sinter.function")
    distribute._stack().append(strategy)
    try:
        for i in range(n):
            a, k = _select(tuple(args), i), _select(kwargs, i)
            if ctx is not None:
                old = ctx.replica
                ctx.replica = (i, n)
                lo = _lib.sn_graph_node_count(ctx.g)
                try:
                    results.append(fn(*a, **k))
                finally:
                    ctx.replica = old
                    ctx.windows.append((i, lo, _lib.sn_graph_node_count(ctx.g)))
            else:
                with _tensor.device(_replica_devices(strategy)[i]):
                    results.append(fn(*a, **k))
        if ctx is not None:
            _function.flush_replica_updates(ctx)
    finally:
        distribute._stack().pop()
    return _regroup(results)


def reduce(strategy, reduce_op, value, axis=None):
    op = getattr(reduce_op, "value", reduce_op)
    op = str(op).upper().split(".")[-1]
    if op not in ("SUM", "MEAN"):
        raise ValueError(f"reduce: {reduce_op!r}; expected ReduceOp.SUM or ReduceOp.MEAN")
    vals = value.values if isinstance(value, PerReplica) else (value,)
    arrs = [np.asarray(v.numpy() if hasattr(v, "numpy") else v) for v in vals]
    dt = vals[0].dtype if _tensor.is_tensor(vals[0]) else _tensor.as_dtype(arrs[0].dtype)
    if axis is None:
        out = np.sum(arrs, axis=0) if op == "SUM" else np.mean(arrs, axis=0)
    else:
        cat = np.concatenate(arrs, axis=axis)
        out = np.sum(cat, axis=axis) if op == "SUM" else np.mean(cat, axis=axis)
    return EagerTensor(np.asarray(out, dt.as_numpy_dtype), dt)


# ---- distributed datasets ---------------------------------------------------------------------

class DistributedDataset:
    """The replicas' inputs, in one of three ways:
    - "split": one dataset of global batches, each split into equal per-replica batches
      (experimental_distribute_dataset);
    - "per_worker": one dataset of per-replica batches, the worker's replicas taking
      consecutive elements, replica 0 first (distribute_datasets_from_function's default);
    - "per_replica": one dataset per replica (InputReplicationMode.PER_REPLICA)."""

    def __init__(self, strategy, datasets, mode):
        self._strategy = strategy
        self._datasets = datasets
        self._mode = mode

    def __iter__(self):
        return DistributedIterator(self)


class DistributedIterator:
    def __init__(self, dd):
        self._n = len(_replica_devices(dd._strategy))
        self._mode = dd._mode
        self._its = [iter(d) for d in dd._datasets]
        self._peeked = None

    def _pull(self):
        if self._peeked is not None:
            out, self._peeked = self._peeked, None
            return out
        if self._mode == "per_replica":
            elems = [next(it) for it in self._its]
        elif self._mode == "per_worker":
            elems = [next(self._its[0]) for _ in range(self._n)]
        else:  # a global batch split into equal per-replica batches
            e = next(self._its[0])
            single = not isinstance(e, tuple)
            parts = [np.array_split(c, self._n) for c in ((e,) if single else e)]
            elems = [parts[0][i] if single else tuple(p[i] for p in parts)
                     for i in range(self._n)]
        return [e if isinstance(e, tuple) else (e,) for e in elems], \
            not isinstance(elems[0], tuple)

    def __iter__(self):
        return self

    def __next__(self):
        ctx = _function.current_trace()
        if ctx is None:
            elems, single = self._pull()
            vals = [tuple(_tensor.convert_to_tensor(c) for c in e) for e in elems]
            vals = [v[0] if single else v for v in vals]
            return _regroup(vals)
        # traced: inputs fed before every step from this iterator; shapes from a peek
        if self._peeked is None:
            self._peeked = self._pull()
        elems, single = self._peeked
        syms, nodes = [], []
        for i, e in enumerate(elems):
            comps = tuple(ctx.step_input(f"replica{i}_component{j}", c)
                          for j, c in enumerate(e))
            nodes += [t._node(ctx) for t in comps]
            for t in comps:  # fed to replica i's plan alone (replica plans)
                ctx.node_replica[t._node(ctx)] = i
            syms.append(comps[0] if single else comps)

        def feeder():
            try:
                got, _ = self._pull()
            except StopIteration:
                raise ValueError("next(iterator) inside a sinter.function: the dataset ended "
                                 "(End of sequence)") from None
            return [c for e in got for c in e]
        ctx.step_inputs.append((feeder, nodes))
        return _regroup(syms)

    def get_next(self):
        return next(self)


def experimental_distribute_dataset(strategy, dataset, options=None):
    return DistributedDataset(strategy, [dataset], "split")


def distribute_datasets_from_function(strategy, dataset_fn, options=None):
    """As TensorFlow: by default dataset_fn is called once per worker, with
    InputContext(workers, this worker's rank, replicas in sync), and returns per-replica
    batches that the worker's replicas take in turn; so a function that ignores its context
    (the TPU guide's `lambda _: get_dataset(...)`) still gives every replica other examples.
    With InputOptions(experimental_replication_mode=PER_REPLICA) it is called once per
    replica, with InputContext(replicas in sync, the replica's global id, replicas in sync)."""
    n = len(_replica_devices(strategy))
    total = strategy.num_replicas_in_sync
    rank = int(_lib.sn_strategy_worker_rank(strategy._h))
    mode = options.experimental_replication_mode if options is not None else \
        InputReplicationMode.PER_WORKER
    if mode == InputReplicationMode.PER_REPLICA:
        return DistributedDataset(strategy, [
            dataset_fn(InputContext(total, rank * n + i, total)) for i in range(n)],
            "per_replica")
    workers = int(_lib.sn_strategy_num_workers(strategy._h))
    return DistributedDataset(strategy, [dataset_fn(InputContext(workers, rank, total))],
                              "per_worker")


def extend(cls):
    cls.run = run
    cls.reduce = reduce
    cls.experimental_distribute_dataset = experimental_distribute_dataset
    cls.distribute_datasets_from_function = distribute_datasets_from_function
    cls.experimental_distribute_datasets_from_function = distribute_datasets_from_function
