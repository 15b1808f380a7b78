"""sinter.function, Variables, GradientTape, sinter.range and the Keras pieces a custom
training loop uses inside them (issue 25).

A `sinter.function` traces its Python function once per input signature into a C graph
(sn_graph): tensor arguments become inputs, Variables become graph variables, `model(x)`
adds the model's layers (conv2d, matmul, bias_add, activations), `tape.gradient` calls
sn_gradients (the C graph's symbolic gradients), `optimizer.apply_gradients` and metric updates
add assign nodes. The compiled plan (sn_plan_new) is then run per call with sn_plan_run(plan,
n): n is 1, or the count of a `sinter.range(n)` loop in the function, so the guide's
multi-step function runs its n steps in one C call, the inputs of each step filled by a feed
callback (next(iterator) inside the trace).

Variables: each has one master copy (NumPy, or for a model's weights the model's own C
variable buffer, which fit also trains). A traced graph holds its own storage of the variables
it uses; the latest value lives in the "owner" (the master, or the last function that ran
with the variable), and is copied only when another owner needs it.
"""
import ctypes as C
import json
import threading
import weakref

import numpy as np

from . import _lib, _tensor
from ._tensor import (EagerTensor, SymbolicTensor, _ArgTensor, as_dtype, float32, int32,
                      int64, lib, check)

_local = threading.local()


def current_trace():
    return getattr(_local, "trace", None)


# ---- variables --------------------------------------------------------------------------------

class Variable(_tensor._Ops):
    _is_variable = True
    _count = 0

    def __init__(self, initial_value=None, trainable=True, name=None, dtype=None, shape=None):
        dtype = as_dtype(dtype)
        if initial_value is None:
            raise ValueError("Variable: initial_value is required")
        if callable(initial_value):
            initial_value = initial_value()
        v = initial_value._value if isinstance(initial_value, EagerTensor) else initial_value
        a = np.asarray(v)
        if dtype is None:
            dtype = _tensor.convert_to_tensor(v).dtype
        Variable._count += 1
        self.name = (name or "Variable") + ":0"
        self.trainable = trainable
        self._dtype = dtype
        self._master = np.array(a, dtype=dtype.as_numpy_dtype)
        self._owner = None  # None: the master holds the value; else a _Concrete

    # the master storage (a model's variables override this with a view of its C buffer)
    def _master_view(self):
        return self._master

    def _sync(self):
        """Brings the value back to the master from the function that last ran with it."""
        if self._owner is not None:
            np.copyto(self._master_view(), self._owner.var_view(self), casting="unsafe")
            self._owner = None

    @property
    def dtype(self):
        return self._dtype

    @property
    def shape(self):
        return _tensor.TensorShape(self._master_view().shape)

    @property
    def device(self):
        return _tensor._full_name(_tensor.current_device())

    def numpy(self):
        if current_trace() is not None:
            raise NotImplementedError("Variable.numpy() inside a traced sinter.function")
        self._sync()
        return self._master_view().copy()[()]

    def read_value(self):
        if current_trace() is not None:
            return SymbolicTensor(current_trace(), current_trace().node_of(self), self._dtype)
        return EagerTensor(np.array(self.numpy()), self._dtype)

    value = read_value

    def _node(self, ctx):
        return ctx.var_node(self)

    def _assign(self, value, add):
        ctx = current_trace()
        if ctx is not None:
            v = _tensor._match([self, value])[1] if not _tensor.is_tensor(value) else value
            node = ctx.node_of(v)
            if ctx.replica_strategy is not None and ctx.replica is not None:
                # MirroredStrategy's sum on write: the replicas' deltas meet in an all-reduce
                # and replica 0 adds the sum (flush_replica_updates)
                if not add:
                    raise NotImplementedError(
                        f"Variable '{self.name}'.assign inside strategy.run over "
                        f"{ctx.replica[1]} replicas in a sinter.function: sinter sums the "
                        "replicas' assign_add (as a metric's update_state) and applies "
                        "apply_gradients once; a plain assign from every replica is not "
                        "supported")
                ctx.pending_adds.append((ctx.replica[0], self, node))
                return self
            n = (lib.sn_assign_add if add else lib.sn_assign)(ctx.g, ctx.var_node(self), node)
            _tensor._graph_error(ctx.g, f"Variable '{self.name}'.assign")
            ctx.effects.append(n)
            ctx.written.add(self)
            return SymbolicTensor(ctx, n, self._dtype)
        self._sync()
        m = self._master_view()
        val = np.asarray(value._value if isinstance(value, EagerTensor) else value)
        if add:
            np.copyto(m, m + val, casting="unsafe")
        else:
            np.copyto(m, np.broadcast_to(val, m.shape), casting="unsafe")
        return self

    def assign(self, value, use_locking=False, name=None, read_value=True):
        return self._assign(value, False)

    def assign_add(self, delta, use_locking=False, name=None, read_value=True):
        return self._assign(delta, True)

    def assign_sub(self, delta, use_locking=False, name=None, read_value=True):
        return self._assign(_tensor.negative(delta) if _tensor.is_tensor(delta) else -np.asarray(
            delta), True)

    @property
    def _value(self):
        return np.asarray(self.numpy())

    def __float__(self):
        return float(self.numpy())

    def __int__(self):
        return int(self.numpy())

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.numpy(), dtype)

    def __repr__(self):
        if current_trace() is not None:
            return f"<tf.Variable '{self.name}' shape={_tensor._shape_str(self.shape)} " \
                f"dtype={self._dtype.name}>"
        v = self.numpy()
        return f"<tf.Variable '{self.name}' shape={_tensor._shape_str(self.shape)} " \
            f"dtype={self._dtype.name}, numpy={np.array(v)!r}>"


class _ModelVariable(Variable):
    """A model weight: the master is the model's C variable buffer (what fit trains)."""

    def __init__(self, model, node, trainable):
        self._model = model
        self._cnode = node
        g = lib.sn_model_graph(model._h)
        self.name = lib.sn_node_name(g, node).decode() + ":0"
        self.trainable = trainable
        self._dtype = _tensor._BY_SN[lib.sn_node_dtype(g, node)]
        self._owner = None

    def _master_view(self):
        from .keras.models import _np_view
        g = lib.sn_model_graph(self._model._h)
        return _np_view(lib.sn_variable_data(g, self._cnode), lib.sn_node_shape(g, self._cnode)
                        .tuple(), lib.sn_node_dtype(g, self._cnode))


def model_variables(model, trainable_only=True):
    model._need_built("trainable_variables")
    model._push_trainable()  # layer.trainable as set now (frozen weights leave the set)
    cache = model.__dict__.setdefault("_sinter_vars", {})
    g = lib.sn_model_graph(model._h)
    buf = (C.c_int32 * 4096)()
    k = lib.sn_graph_variables(g, True, buf, 4096)
    trainable = set(buf[:k])
    out = []
    for i in range(lib.sn_model_layer_count(model._h)):
        nodes = (C.c_int32 * 256)()
        k = lib.sn_model_layer_variables(model._h, i, nodes, 256)
        for n in nodes[:k]:
            if trainable_only and n not in trainable:
                continue
            if n not in cache:
                cache[n] = _ModelVariable(model, n, n in trainable)
            out.append(cache[n])
    return out


# ---- tracing ----------------------------------------------------------------------------------

class _Trace:
    def __init__(self, device):
        self.g = lib.sn_graph_new()
        if not self.g:
            raise MemoryError("sinter.function: out of memory")
        self.device = device
        self.vars = {}        # Variable -> node
        self.written = set()  # Variables the function assigns
        self.effects = []     # assign nodes (plan targets)
        self.args = []        # _ArgTensor with an input node
        self.step_inputs = []  # (feeder, [nodes]): fed before every step
        self.loop = None      # None, an int, or the _ArgTensor holding the count
        self.replica = None   # (index, count) inside strategy.run
        self.pending_updates = []  # (replica, optimizer, [(gradient, variable)])
        # strategy.run over several CPU replicas: each replica's nodes become its own plan,
        # run on the replica threads as fit runs its step (see _distribute_run)
        self.replica_strategy = None
        self.windows = []          # (replica, lo, hi): the nodes made in its strategy.run call
        self.node_replica = {}     # nodes made outside those calls that belong to one replica
        self.replica_targets = {}  # replica -> plan targets added for it (all-reduces, barrier)
        self.pending_adds = []     # (replica, Variable, node): assign_adds awaiting the all-reduce

    def var_node(self, v):
        n = self.vars.get(v)
        if n is None:
            shape = _lib.Shape.of(v.shape)
            n = lib.sn_variable(self.g, v.name.split(":")[0].encode(),
                                _tensor._graph_dtype(v.dtype), C.byref(shape), bool(v.trainable))
            _tensor._graph_error(self.g, f"variable '{v.name}'")
            self.vars[v] = n
        return n

    def arg_input(self, t):
        shape = _lib.Shape.of(t._shape_v)
        n = lib.sn_input(self.g, f"arg{t.index}".encode(), _tensor._graph_dtype(t.dtype),
                         C.byref(shape))
        _tensor._graph_error(self.g, f"argument {t.index}")
        self.args.append(t)
        return n

    def step_input(self, name, array):
        """An input fed before every step (an element of an iterator) shaped like array."""
        a = np.asarray(array)
        dt = _tensor.as_dtype(a.dtype)
        n = lib.sn_input(self.g, name.encode(), _tensor._graph_dtype(dt),
                         C.byref(_lib.Shape.of(a.shape)))
        _tensor._graph_error(self.g, f"input '{name}'")
        return SymbolicTensor(self, n, dt if dt is not int64 else int64)

    def node_of(self, x):
        if getattr(x, "_is_variable", False):
            return self.var_node(x)
        if isinstance(x, SymbolicTensor):
            return x._node(self)
        x = _tensor.convert_to_tensor(x)
        n = _tensor._const_node(self.g, x)
        _tensor._graph_error(self.g, "constant")
        return n


def _flatten(x, out):
    if isinstance(x, (list, tuple)):
        for v in x:
            _flatten(v, out)
    elif isinstance(x, dict):
        for k in sorted(x):
            _flatten(x[k], out)
    elif type(x).__name__ == "PerReplica":
        for v in x.values:
            _flatten(v, out)
    else:
        out.append(x)
    return out


def _signature(x):
    if isinstance(x, EagerTensor):
        return ("T", tuple(x.shape), x.dtype.name)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple((k, _signature(x[k])) for k in sorted(x))
    if type(x).__name__ == "PerReplica":
        return ("PerReplica",) + tuple(_signature(v) for v in x.values)
    if isinstance(x, np.ndarray):
        return ("A", x.shape, str(x.dtype), x.tobytes())
    try:
        hash(x)
        return ("P", type(x).__name__, x)
    except TypeError:
        return ("O", id(x))


class _PlanMemory:
    """One device's sn_plan_memory: the arena and scratch that every traced function's plan
    on that device shares (graph.h), so a program's functions, which run one at a time, cost
    the memory of the largest plan instead of the sum (the guide holds a train_step and a
    tf.range function, each with one ~390 MB plan per replica). Each plan holds a reference
    in C; this object holds the creator's, dropped when no trace uses it any more."""

    def __init__(self):
        self.h = lib.sn_plan_memory_new()
        if not self.h:
            raise MemoryError("sinter.function: out of memory")

    def __del__(self):
        if self.h and lib is not None:
            lib.sn_plan_memory_free(self.h)
            self.h = None


_memories = weakref.WeakValueDictionary()  # device key -> _PlanMemory
# Plans sharing a memory must not run at the same time: traced calls from several Python
# threads take turns (the C calls release the GIL). Reentrant, for a dataset's Python code
# that calls a traced function between the steps of another.
_run_lock = threading.RLock()


def _plan_memory(device):
    """The shared plan memory of a device ("cpu:0", or a full TensorFlow device name)."""
    d = device.decode() if isinstance(device, bytes) else str(device)
    key = d.rsplit("device:", 1)[-1].lower()
    m = _memories.get(key)
    if m is None:
        m = _memories[key] = _PlanMemory()
    return m


class _Concrete:
    """One trace: its graph, its plan and what feeds it."""

    def __init__(self, fn, args, kwargs, device):
        ctx = _Trace(device)
        self.ctx = ctx
        self._plan = None
        self._plans = None  # one plan per replica (strategy.run over CPU replicas)
        self._memories = []  # the _PlanMemory objects its plans share (kept alive with it)
        self._refs = [ctx.g, None]  # freed together when this trace is collected
        weakref.finalize(self, _free, self._refs)
        counter = [0]

        def symbolic(x):
            if isinstance(x, EagerTensor):
                t = _ArgTensor(ctx, x, counter[0])
                counter[0] += 1
                return t
            if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
                return type(x)(symbolic(v) for v in x)
            if isinstance(x, dict):  # in _flatten's order (sorted keys): the indices match
                return {k: symbolic(x[k]) for k in sorted(x)}
            if type(x).__name__ == "PerReplica":
                return type(x)([symbolic(v) for v in x.values])
            if isinstance(x, np.ndarray):
                return _tensor.convert_to_tensor(x)
            return x
        sargs = symbolic(list(args))
        skw = symbolic(dict(kwargs))
        _local.trace = ctx
        try:
            out = fn(*sargs, **skw)
        finally:
            _local.trace = None
        self.out = out
        flat = [t for t in _flatten(out, []) if isinstance(t, SymbolicTensor)]
        self.targets = [t._node(ctx) for t in flat] + ctx.effects
        self.flat_out = flat
        if not self.targets:
            return
        if ctx.replica_strategy is not None:
            self._make_replica_plans(getattr(fn, '__name__', 'function'))
            return
        arr = (C.c_int32 * len(self.targets))(*self.targets)
        opts = lib.sn_plan_opts_defaults()
        opts.device = _tensor._c_device(device)
        self._memories.append(_plan_memory(opts.device))
        opts.memory = self._memories[-1].h
        plan = C.c_void_p()
        check(lib.sn_plan_new(C.byref(plan), ctx.g, len(self.targets), arr, C.byref(opts)),
              f"sinter.function '{getattr(fn, '__name__', 'function')}'")
        self._plan = plan
        self._refs[1] = plan.value

    def _replica_of(self, node):
        r = self.ctx.node_replica.get(node)
        if r is None:
            r = next((rep for rep, lo, hi in self.ctx.windows if lo <= node < hi), None)
        return r

    def _make_replica_plans(self, name):
        """One plan per local replica over the traced graph (see _distribute_run)."""
        ctx = self.ctx
        s = ctx.replica_strategy._h
        n = int(lib.sn_strategy_local_replicas(s))
        targets = {r: list(ctx.replica_targets.get(r, [])) for r in range(n)}
        for t in [t._node(ctx) for t in self.flat_out] + ctx.effects:
            r = self._replica_of(t)
            if r is None:
                raise NotImplementedError(
                    f"sinter.function '{name}': it calls strategy.run over {n} replicas, so "
                    "every value it returns and every variable it changes must come from "
                    "inside strategy.run (return the PerReplica values and reduce them "
                    "outside the function)")
            targets[r].append(t)
        plans = (C.c_void_p * n)()
        self._refs.append(plans)
        for r in range(n):
            tg = list(dict.fromkeys(targets[r]))
            if not tg:
                raise NotImplementedError(f"sinter.function '{name}': replica {r} computes "
                                          "nothing inside strategy.run")
            opts = lib.sn_plan_opts_defaults()
            opts.device = lib.sn_strategy_replica_device(s, r)
            self._memories.append(_plan_memory(opts.device))
            opts.memory = self._memories[-1].h
            p = C.c_void_p()
            check(lib.sn_plan_new(C.byref(p), ctx.g, len(tg), (C.c_int32 * len(tg))(*tg),
                                  C.byref(opts)), f"sinter.function '{name}': replica {r}'s plan")
            plans[r] = p.value
        self._plans = plans
        # which plans read each argument and iterator element (a tensor argument may feed
        # every replica; an iterator's element feeds its own)
        inputs = [t._node_id for t in ctx.args] + [n_ for _, ns in ctx.step_inputs for n_ in ns]
        self._readers = {i: [r for r in range(n) if lib.sn_plan_buffer(plans[r], i)]
                         for i in inputs}

    def _run_replicas(self, steps, arg_data):
        ctx = self.ctx
        keep, error = [], []

        def nxt(_ctx, step, out, count):
            try:
                items = [(n, a) for n, a in arg_data]
                for feeder, nodes in ctx.step_inputs:
                    for n, a in zip(nodes, feeder()):
                        items.append((n, np.ascontiguousarray(
                            a, np.int32 if a.dtype.kind in "iu" and a.dtype != np.uint8
                            else a.dtype)))
                ins = [(r, n, a) for n, a in items for r in self._readers[n]]
                arr = (_tensor.ReplicaInput * max(1, len(ins)))()
                for k, (r, n, a) in enumerate(ins):
                    arr[k].replica, arr[k].node = r, n
                    arr[k].data, arr[k].bytes = a.ctypes.data, a.nbytes
                keep[:] = [arr, items]  # valid until the next step's call
                out[0] = C.cast(arr, C.POINTER(_tensor.ReplicaInput))
                count[0] = len(ins)
                return 0
            except BaseException as e:  # raised again below, after the C call returns
                error.append(e)
                return _lib.SN_ERR_STATE
        cb = _tensor.NEXT_FN(nxt)
        st = lib.sn_strategy_run_plans(ctx.replica_strategy._h, self._plans, steps, cb, None)
        if error:
            raise error[0]
        check(st, "sinter.function")

    def var_view(self, v):
        from .keras.models import _np_view
        g, n = self.ctx.g, self.ctx.vars[v]
        return _np_view(lib.sn_variable_data(g, n), lib.sn_node_shape(g, n).tuple(),
                        lib.sn_node_dtype(g, n))

    def run(self, args, kwargs):
        with _run_lock:  # its plans share memory with other traces' (_PlanMemory)
            return self._run(args, kwargs)

    def _run(self, args, kwargs):
        ctx = self.ctx
        if self._plan is None and self._plans is None:
            return _restructure(self.out, {})
        # the variables' latest values into this graph's storage
        for v in ctx.vars:
            if v._owner is not self:
                v._sync()
                np.copyto(self.var_view(v), v._master_view(), casting="unsafe")
                v._owner = self
        flat_args = [x for x in _flatten([list(args), dict(kwargs)], [])
                     if isinstance(x, EagerTensor)]
        steps = 1
        if ctx.loop is not None:
            steps = ctx.loop if isinstance(ctx.loop, int) else int(flat_args[ctx.loop.index])
        plan = self._plan
        arg_data = []
        for t in ctx.args:
            a = flat_args[t.index]._value
            a = np.ascontiguousarray(a, np.int32 if a.dtype == np.int64 else a.dtype)
            arg_data.append((t._node_id, a))
        error = []

        def feed(_ctx, p, step):
            try:
                for n, a in arg_data:
                    check(lib.sn_plan_set_input(plan, n, a.ctypes.data_as(C.c_void_p),
                                                a.nbytes), "argument")
                for feeder, nodes in ctx.step_inputs:
                    for n, a in zip(nodes, feeder()):
                        a = np.ascontiguousarray(a, np.int32 if a.dtype.kind in "iu" and
                                                 a.dtype != np.uint8 else a.dtype)
                        check(lib.sn_plan_set_input(plan, n, a.ctypes.data_as(C.c_void_p),
                                                    a.nbytes), "iterator element")
                return 0
            except BaseException as e:  # raised again below, after the C call returns
                error.append(e)
                return _lib.SN_ERR_STATE
        cb = _tensor.FEED_FN(feed)
        if self._plans is not None:
            self._run_replicas(steps, arg_data)
        elif steps > 0:
            st = lib.sn_plan_run(plan, steps, cb, None)
            if error:
                raise error[0]
            check(st, "sinter.function")
        outs = {}
        from .keras.models import _np_view
        for t in self.flat_out:
            n = t._node(ctx)
            shape = lib.sn_node_shape(ctx.g, n).tuple()
            p = plan if self._plans is None else self._plans[self._replica_of(n)]
            a = _np_view(lib.sn_plan_buffer(p, n), shape, lib.sn_node_dtype(ctx.g, n)).copy()
            if t.dtype is int64:
                a = a.astype(np.int64)
            outs[id(t)] = EagerTensor(a, t.dtype, ctx.device)
        return _restructure(self.out, outs)


def _free(refs):
    g, plan = refs[:2]
    if plan:
        lib.sn_plan_free(C.c_void_p(plan))
    for plans in refs[2:]:  # the replicas' plans
        for p in plans:
            if p:
                lib.sn_plan_free(C.c_void_p(p))
    if g:
        lib.sn_graph_free(g)


def _restructure(x, outs):
    if isinstance(x, SymbolicTensor):
        return outs[id(x)]
    if isinstance(x, (list, tuple)) and type(x) in (list, tuple):
        return type(x)(_restructure(v, outs) for v in x)
    if isinstance(x, dict):
        return {k: _restructure(v, outs) for k, v in x.items()}
    if type(x).__name__ == "PerReplica":
        return type(x)([_restructure(v, outs) for v in x.values])
    return x


class Function:
    def __init__(self, fn, input_signature=None, jit_compile=None, reduce_retracing=False):
        self._fn = fn
        self._cache = {}
        self.__name__ = getattr(fn, "__name__", "function")
        self.__doc__ = getattr(fn, "__doc__", None)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        import functools
        return functools.partial(self.__call__, obj)

    def __call__(self, *args, **kwargs):
        if current_trace() is not None:  # a function called from a traced one is inlined
            return self._fn(*args, **kwargs)
        dev = _tensor.current_device()
        key = (dev, _signature(list(args)), _signature(dict(kwargs)))
        # making a plan may move the shared plan memory (_PlanMemory): not while another
        # thread's trace runs on it
        with _run_lock:
            cf = self._cache.get(key)
            if cf is None:
                cf = _Concrete(self._fn, args, kwargs, dev)
                self._cache[key] = cf
            return cf.run(args, kwargs)

    def experimental_get_tracing_count(self):
        return len(self._cache)


def function(func=None, input_signature=None, autograph=True, jit_compile=None,
             reduce_retracing=False, experimental_compile=None, **kwargs):
    if func is None:
        return lambda f: Function(f, input_signature, jit_compile, reduce_retracing)
    return Function(func, input_signature, jit_compile, reduce_retracing)


def range_(start, limit=None, delta=1, dtype=None, name=None):  # noqa: A001 (tf.range)
    """tf.range. Inside a traced function, `for _ in sinter.range(n)` makes the plan run n
    steps per execution: the loop's body is traced once, and the whole function is that
    body (anything before or after the loop runs every step too)."""
    import builtins
    ctx = current_trace()
    if ctx is None:
        if limit is None:
            start, limit = 0, start
        return [_tensor.constant(i, dtype) for i in builtins.range(int(start), int(limit),
                                                                    int(delta))]
    if limit is not None or delta != 1:
        raise NotImplementedError("sinter.range inside a traced function: only range(n)")
    if ctx.loop is not None:
        raise NotImplementedError("sinter.range: one loop per traced function")
    if isinstance(start, _ArgTensor):
        ctx.loop = start
    elif isinstance(start, SymbolicTensor):
        raise NotImplementedError("sinter.range(n) inside a traced function: n must be an "
                                  "argument of the function or a Python int")
    else:
        ctx.loop = int(start)
    return iter([_tensor.constant(0)])


# ---- GradientTape -----------------------------------------------------------------------------

def _tapes():
    return getattr(_local, "tapes", [])


class GradientTape:
    """Inside a traced function, tape.gradient(target, sources) adds sn_gradients' nodes to
    the function's graph. Eagerly, the tape keeps a graph of its own: every op run while it is
    open is also added there (its inputs from outside as constants, Variables as variables),
    and gradient() adds sn_gradients' nodes and runs a plan for them once."""

    def __init__(self, persistent=False, watch_accessed_variables=True):
        self.persistent = persistent
        self._eager = False
        self._g = None

    def __enter__(self):
        if current_trace() is not None:
            return self
        self._eager = True
        if self._g is None:
            self._g = lib.sn_graph_new()
            if not self._g:
                raise MemoryError("GradientTape: out of memory")
            self._refs = [self._g, None]
            weakref.finalize(self, _free, self._refs)
            self._vars = {}    # Variable -> node
            self._nodes = {}   # id(tensor) -> (tensor, node)
        _local.tapes = _tapes() + [self]
        return self

    def __exit__(self, *exc):
        if self._eager:
            _local.tapes = [t for t in _tapes() if t is not self]
        return False

    # the interface call_model builds layers through (as a _Trace's)
    @property
    def g(self):
        return self._g

    def var_node(self, v):
        n = self._vars.get(v)
        if n is None:
            n = lib.sn_variable(self._g, v.name.split(":")[0].encode(),
                                _tensor._graph_dtype(v.dtype), C.byref(_lib.Shape.of(v.shape)),
                                bool(v.trainable))
            _tensor._graph_error(self._g, f"GradientTape: variable '{v.name}'")
            self._vars[v] = n
        return n

    def node_of(self, x):
        if getattr(x, "_is_variable", False):
            return self.var_node(x)
        e = self._nodes.get(id(x))
        if e is not None and e[0] is x:
            return e[1]
        x = _tensor.convert_to_tensor(x)
        n = _tensor._const_node(self._g, x)  # a value made before the tape: a constant
        _tensor._graph_error(self._g, "GradientTape: constant")
        self._nodes[id(x)] = (x, n)
        return n

    def record(self, what, build, xs, result):
        n = build(self._g, *[self.node_of(x) for x in xs])
        _tensor._graph_error(self._g, f"GradientTape: {what}")
        self._nodes[id(result)] = (result, n)

    def evaluate(self, nodes):
        """Runs a plan of the tape's graph for nodes (the variables' current values in)."""
        from .keras.models import _np_view
        g = self._g
        arr = (C.c_int32 * len(nodes))(*nodes)
        plan = C.c_void_p()
        check(lib.sn_plan_new(C.byref(plan), g, len(nodes), arr, None), "GradientTape")
        try:
            for v, n in self._vars.items():
                v._sync()
                np.copyto(_np_view(lib.sn_variable_data(g, n), lib.sn_node_shape(g, n).tuple(),
                                   lib.sn_node_dtype(g, n)), v._master_view(), casting="unsafe")
            check(lib.sn_plan_run(plan, 1, _tensor.FEED_FN(), None), "GradientTape")
            out = []
            for n in nodes:
                a = _np_view(lib.sn_plan_buffer(plan, n), lib.sn_node_shape(g, n).tuple(),
                             lib.sn_node_dtype(g, n)).copy()
                out.append(EagerTensor(a, _tensor.as_dtype(a.dtype)))
            return out
        finally:
            lib.sn_plan_free(plan)

    def watch(self, tensor):
        if self._eager:
            for t in (tensor if isinstance(tensor, (list, tuple)) else [tensor]):
                self.node_of(t)

    def gradient(self, target, sources, output_gradients=None, unconnected_gradients=None):
        if output_gradients is not None:
            raise NotImplementedError("tape.gradient(output_gradients=...) in sinter")
        single = not isinstance(sources, (list, tuple))
        srcs = [sources] if single else list(sources)
        if not self._eager:
            ctx = current_trace()
            loss = ctx.node_of(target)
            wrt = (C.c_int32 * len(srcs))(*[ctx.node_of(s) for s in srcs])
            grads = (C.c_int32 * len(srcs))()
            check(lib.sn_gradients(ctx.g, loss, len(srcs), wrt, grads), "tape.gradient")
            out = [SymbolicTensor(ctx, grads[i]) for i in range(len(srcs))]
            return out[0] if single else out
        e = self._nodes.get(id(target))
        if e is None or e[0] is not target:
            raise ValueError("tape.gradient: the target was not computed while this tape was "
                             "open")
        wrt = (C.c_int32 * len(srcs))(*[self.node_of(s) for s in srcs])
        grads = (C.c_int32 * len(srcs))()
        check(lib.sn_gradients(self._g, e[1], len(srcs), wrt, grads), "tape.gradient")
        out = self.evaluate(list(grads))
        return out[0] if single else out


def tape_record(what, build, xs, result):
    for t in _tapes():
        t.record(what, build, xs, result)


# ---- the model inside a trace -------------------------------------------------------------------

_ACTS = {"relu": lib.sn_relu, "sigmoid": lib.sn_sigmoid, "tanh": lib.sn_tanh}


def _act(g, n, name, layer):
    if name in (None, "linear"):
        return n
    if name == "softmax":
        return lib.sn_softmax(g, n, -1)
    if name in _ACTS:
        return _ACTS[name](g, n)
    raise NotImplementedError(f"model(x) in a traced function: layer '{layer}' has activation "
                              f"{name!r}; sinter traces linear, relu, sigmoid, tanh, softmax")


def call_model(model, x, training=False):
    """model(x) on tensors: eagerly, the model's predict; in a trace, its layers as graph
    nodes over the model's variables."""
    ctx = current_trace()
    if ctx is None:
        tapes = _tapes()
        if not tapes:
            a = np.asarray(x._value if isinstance(x, EagerTensor) else x)
            return EagerTensor(model.predict_on_batch(a), float32)
        if len(tapes) > 1:
            raise NotImplementedError("model(x) under nested eager GradientTapes in sinter")
        # under an eager tape: the layers go into the tape's graph and run there once
        tape = tapes[0]
        n = _model_nodes(tape, model, x, training)
        out = tape.evaluate([n])[0]
        tape._nodes[id(out)] = (out, n)
        return out
    return SymbolicTensor(ctx, _model_nodes(ctx, model, x, training), float32)


def _model_nodes(ctx, model, x, training):
    model._need_built("model(x)")
    g = ctx.g
    node = ctx.node_of(x)
    layers = [e for e in json.loads(model.to_json())["config"]["layers"]
              if e["class_name"] != "InputLayer"]
    allv = {v._cnode: v for v in model_variables(model, trainable_only=False)}
    for i, e in enumerate(layers):
        cls, cfg = e["class_name"], e["config"]
        nodes = (C.c_int32 * 16)()
        k = lib.sn_model_layer_variables(model._h, i, nodes, 16)
        vs = [ctx.var_node(allv[n]) for n in nodes[:k]]
        name = cfg.get("name", cls)
        if cls == "Conv2D":
            o = lib.sn_conv2d_opts_defaults()
            o.stride_h, o.stride_w = cfg.get("strides", (1, 1))
            o.padding = 1 if cfg.get("padding") == "same" else 0
            if tuple(cfg.get("dilation_rate", (1, 1))) != (1, 1) or cfg.get("groups", 1) != 1:
                raise NotImplementedError(f"model(x) in a traced function: Conv2D '{name}' "
                                          "with dilation or groups")
            node = lib.sn_conv2d(g, node, vs[0], C.byref(o))
            if cfg.get("use_bias", True):
                node = lib.sn_bias_add(g, node, vs[1])
            node = _act(g, node, cfg.get("activation"), name)
        elif cls == "Dense":
            node = lib.sn_matmul(g, node, vs[0], False, False)
            if cfg.get("use_bias", True):
                node = lib.sn_bias_add(g, node, vs[1])
            node = _act(g, node, cfg.get("activation"), name)
        elif cls == "Flatten":
            node = lib.sn_flatten(g, node)
        elif cls == "Activation":
            node = _act(g, node, cfg.get("activation"), name)
        elif cls in ("MaxPooling2D", "AveragePooling2D"):
            o = lib.sn_pool2d_opts_defaults()
            o.pool_h, o.pool_w = cfg.get("pool_size", (2, 2))
            o.stride_h, o.stride_w = cfg.get("strides") or (o.pool_h, o.pool_w)
            o.padding = 1 if cfg.get("padding") == "same" else 0
            node = (lib.sn_max_pool2d if cls == "MaxPooling2D" else lib.sn_avg_pool2d)(
                g, node, C.byref(o))
        elif cls == "Dropout":
            if training and cfg.get("rate", 0) > 0:
                from . import _random
                node = lib.sn_dropout(g, node, float(cfg["rate"]), _random.next_seed())
        else:
            raise NotImplementedError(f"model(x) in a traced function: layer class {cls} "
                                      f"('{name}'); sinter traces Conv2D, Dense, Flatten, "
                                      "Activation, MaxPooling2D, AveragePooling2D, Dropout")
        _tensor._graph_error(g, f"model(x): layer '{name}'")
    return node


# ---- optimizers -------------------------------------------------------------------------------

def optimizer_iterations(opt):
    it = opt.__dict__.get("_iterations")
    if it is None:
        it = Variable(np.int64(0), trainable=False, name="iteration", dtype=int64)
        opt._iterations = it
    return it


def _slot(opt, var, kind):
    slots = opt.__dict__.setdefault("_slots", {})
    key = (id(var), kind)
    if key not in slots:
        slots[key] = (Variable(np.zeros(var.shape, np.float32), trainable=False,
                               name=f"{var.name.split(':')[0]}_{kind}"), var)
    return slots[key][0]


def apply_gradients(opt, grads_and_vars):
    ctx = current_trace()
    pairs = [(g, v) for g, v in grads_and_vars if g is not None]
    if ctx is None:
        # eagerly: the update as a sinter.function over the gradients, traced once per set
        # of variables (and gradient shapes)
        fns = opt.__dict__.setdefault("_eager_apply", {})
        vs = [v for _, v in pairs]
        key = tuple(id(v) for v in vs)
        if key not in fns:
            fns[key] = (Function(lambda *gs: _apply_update(opt, list(zip(gs, vs)))), vs)
        fns[key][0](*[_tensor.convert_to_tensor(g) for g, _ in pairs])
        return None
    if ctx.replica is not None and ctx.replica[1] > 1:
        # MirroredStrategy's all-reduce: the replicas' gradients are summed, then applied once
        ctx.pending_updates.append((ctx.replica[0], opt, pairs))
        return None
    return _apply_update(opt, pairs)


def flush_replica_updates(ctx):
    if ctx.replica_strategy is not None:
        return _flush_to_replica_plans(ctx)
    by_opt = {}
    for _, opt, pairs in ctx.pending_updates:
        by_opt.setdefault(id(opt), (opt, []))[1].append(pairs)
    ctx.pending_updates = []
    for opt, lists in by_opt.values():
        summed = []
        for j, (g0, v) in enumerate(lists[0]):
            total = g0
            for other in lists[1:]:
                total = _tensor.add(total, other[j][0])
            summed.append((total, v))
        _apply_update(opt, summed)


def _flush_to_replica_plans(ctx):
    """The end of one strategy.run in a trace whose replicas run as plans: every replica's
    gradients and assign_add deltas go through all-reduces (created in one order on every
    replica: each meets the others there), replica 0 applies the sums once (its update's
    nodes join its plan), and a barrier ends every replica's step, so none reads a variable
    while replica 0 writes it. The bits are those of the one-plan sum: replica order."""
    s = ctx.replica_strategy
    n = int(lib.sn_strategy_local_replicas(s._h))

    def reduce(x, r, what):
        if x.dtype is not float32:
            raise NotImplementedError(f"strategy.run in a sinter.function: {what} of dtype "
                                      f"{x.dtype.name}; the replicas' all-reduce sums float32")
        out = C.c_int32()
        check(lib.sn_strategy_all_reduce_node(s._h, ctx.g, x._node(ctx), r, C.byref(out)),
              f"strategy.run: replica {r}'s all-reduce of {what}")
        if r > 0:
            ctx.replica_targets.setdefault(r, []).append(out.value)
        else:
            ctx.node_replica[out.value] = 0
        return SymbolicTensor(ctx, out.value, float32)

    def per_replica(items, what):
        by = {}
        for r, *rest in items:
            by.setdefault(r, []).append(rest)
        if by and (sorted(by) != list(range(n)) or len({len(v) for v in by.values()}) != 1):
            raise ValueError(f"strategy.run in a sinter.function: {what} was called by replicas "
                             f"{sorted(by)} with counts {[len(by[r]) for r in sorted(by)]}; "
                             f"every one of the {n} replicas must make the same calls")
        return by
    ups = per_replica(ctx.pending_updates, "apply_gradients")
    adds = per_replica(ctx.pending_adds, "Variable.assign_add")
    ctx.pending_updates, ctx.pending_adds = [], []
    summed = []
    for k, (opt, pairs0) in enumerate(ups.get(0, [])):
        out = []
        for j, (g0, v) in enumerate(pairs0):
            red = None
            for r in range(n):
                opt_r, pairs_r = ups[r][k]
                if opt_r is not opt or len(pairs_r) != len(pairs0) or pairs_r[j][1] is not v:
                    raise ValueError("strategy.run in a sinter.function: the replicas applied "
                                     "different gradients or optimizers")
                g = pairs_r[j][0]
                g = g if isinstance(g, SymbolicTensor) else _tensor.convert_to_tensor(g)
                t = reduce(_as_symbolic(ctx, g), r, f"the gradient of '{v.name}'")
                red = t if r == 0 else red
            out.append((red, v))
        summed.append((opt, out))
    sums = []
    for k, (v, _) in enumerate(adds.get(0, [])):
        red = None
        for r in range(n):
            vr, node = adds[r][k]
            if vr is not v:
                raise ValueError("strategy.run in a sinter.function: the replicas' assign_add "
                                 "calls differ in their variables")
            t = reduce(SymbolicTensor(ctx, node, _tensor._BY_SN[lib.sn_node_dtype(ctx.g, node)]),
                       r, f"the assign_add to '{v.name}'")
            red = t if r == 0 else red
        sums.append((v, red))
    if not summed and not sums:
        return None
    lo = lib.sn_graph_node_count(ctx.g)
    for opt, pairs in summed:
        _apply_update(opt, pairs)
    for v, t in sums:
        v.assign_add(t)
    ctx.windows.append((0, lo, lib.sn_graph_node_count(ctx.g)))
    var = next(iter(ctx.vars.values()))
    for r in range(n):
        b = C.c_int32()
        check(lib.sn_strategy_barrier_node(s._h, ctx.g, var, r, C.byref(b)),
              f"strategy.run: replica {r}'s end of step")
        ctx.replica_targets.setdefault(r, []).append(b.value)
    return None


def _as_symbolic(ctx, x):
    return x if isinstance(x, SymbolicTensor) else SymbolicTensor(ctx, ctx.node_of(x), x.dtype)


def _lr(opt):
    lr = opt.learning_rate
    if not isinstance(lr, (int, float)):
        raise NotImplementedError("apply_gradients in sinter: a learning-rate schedule inside "
                                  "a traced function")
    return float(lr)


def _apply_update(opt, pairs):
    """apply_gradients inside a trace: fit's own update kernel (sn_optimizer_update: Keras's
    formulas in one pass over each variable and its slots) for every optimizer sinter has,
    then iterations += 1 once."""
    it = optimizer_iterations(opt)
    _lr(opt)  # a schedule cannot be traced yet
    ctx = current_trace()
    o = opt._opts()
    ns = lib.sn_optimizer_slot_count(C.byref(o))
    for g, v in pairs:
        slots = [ctx.var_node(_slot(opt, v, lib.sn_optimizer_slot_name(C.byref(o), s).decode()))
                 for s in range(ns)]
        g = g if _tensor.is_tensor(g) else _tensor.convert_to_tensor(g)
        out = C.c_int32()
        check(lib.sn_optimizer_update(ctx.g, C.byref(o), ctx.var_node(v), ctx.node_of(g),
                                      ctx.var_node(it), (C.c_int32 * max(1, ns))(*slots),
                                      C.byref(out)),
              f"apply_gradients: {type(opt).__name__}'s update of '{v.name}'")
        ctx.effects.append(out.value)
        ctx.written.add(v)
        ctx.written.update(_slot(opt, v, lib.sn_optimizer_slot_name(C.byref(o), s).decode())
                           for s in range(ns))
    it.assign_add(np.int32(1))
    return None


# ---- losses and metrics as tensor ops -------------------------------------------------------

def sparse_categorical_crossentropy(y_true, y_pred, from_logits=False, axis=-1,
                                    ignore_class=None):
    labels = _tensor.cast(y_true, int32) if _tensor.is_tensor(y_true) else \
        _tensor.convert_to_tensor(np.asarray(y_true, np.int32))
    logits = y_pred if from_logits else _tensor.log(y_pred)
    # from probabilities: softmax(log p) = p where p sums to 1, so the same kernel applies
    return _tensor.apply("sparse_categorical_crossentropy",
                         lambda g, l, y: lib.sn_sparse_softmax_xent(g, l, y), logits, labels)


def sparse_accuracy(y_true, y_pred):
    labels = _tensor.cast(y_true, int32) if _tensor.is_tensor(y_true) else \
        _tensor.convert_to_tensor(np.asarray(y_true, np.int32))
    return _tensor.apply("sparse_categorical_accuracy",
                         lambda g, p, y: lib.sn_sparse_accuracy(g, p, y), y_pred, labels)


def compute_average_loss(per_example_loss, sample_weight=None, global_batch_size=None):
    if sample_weight is not None:
        per_example_loss = _tensor.multiply(per_example_loss, sample_weight)
    if global_batch_size is None:
        from . import distribute
        s = distribute.get_strategy()
        n = per_example_loss.shape[0] if len(per_example_loss.shape) else 1
        global_batch_size = n * (s.num_replicas_in_sync if s is not None else 1)
    return _tensor.divide(_tensor.reduce_sum(per_example_loss), float(global_batch_size))


# ---- Dataset.map --------------------------------------------------------------------------------

def dataset_map_stacked(ds, fn):
    """Dataset.map's fast path (see data.Dataset.map): fn called once, eagerly, on all
    elements of an in-memory dataset stacked (each op a C graph over the whole array). Returns
    the mapped dataset, or None where that path does not apply: not a from_tensor_slices
    dataset without transforms, fn failing on stacked tensors, or fn not treating each element
    alone (its stacked result's first row differs from fn on the first element)."""
    from . import data
    if ds._source[0] != "tensors" or ds._ops:
        return None
    arrays, single = ds._source[1], ds._source[2]

    def call(comps):
        out = fn(comps[0]) if single else fn(*comps)
        parts = out if isinstance(out, (tuple, list)) else (out,)
        return isinstance(out, (tuple, list)), [
            np.asarray(p._value if isinstance(p, EagerTensor) else p) for p in parts]
    try:
        is_tuple, whole = call([_tensor.convert_to_tensor(a) for a, _ in arrays])
        is_tuple1, first = call([_tensor.convert_to_tensor(np.asarray(a)[0]) for a, _ in arrays])
    except Exception:  # noqa: BLE001 - the per-element path reports fn's own errors
        return None
    if is_tuple != is_tuple1 or len(whole) != len(first) or any(
            w.shape[1:] != f.shape or not np.allclose(w[0], f, rtol=1e-6, atol=0)
            for w, f in zip(whole, first)):
        return None
    return data.Dataset.from_tensor_slices(tuple(whole) if is_tuple else whole[0])


# ---- keeping the model's own C calls in step with traced functions ------------------------------

def _sync_model(model):
    """The model's weights back into its C buffer from the traced function that last trained
    them; the next traced run copies them in again, so fit, evaluate, predict, save and
    set_weights always see and change the latest values."""
    for v in model.__dict__.get("_sinter_vars", {}).values():
        v._sync()


def _wrap_model_methods():
    import functools
    from .keras import models
    for name in ("fit", "evaluate", "predict", "predict_on_batch", "get_weights",
                 "set_weights", "save", "save_weights", "load_weights", "summary"):
        orig = getattr(models.Model, name)

        def wrapper(self, *a, __orig=orig, **k):
            _sync_model(self)
            return __orig(self, *a, **k)
        setattr(models.Model, name, functools.wraps(orig)(wrapper))
    # Sequential overrides get_weights
    orig_seq = models.Sequential.get_weights

    def seq_get_weights(self, *a, **k):
        _sync_model(self)
        return orig_seq(self, *a, **k)
    models.Sequential.get_weights = functools.wraps(orig_seq)(seq_get_weights)


_wrap_model_methods()


# ---- the other Keras loss functions as tensor ops (per example: reduced over the last axis) ----

def _log_softmax(x):
    return _tensor.apply("log_softmax", lambda g, n: lib.sn_log_softmax(g, n, -1), x)


def categorical_crossentropy(y_true, y_pred, from_logits=False):
    y_true = _tensor.cast(y_true, float32) if _tensor.is_tensor(y_true) else \
        _tensor.convert_to_tensor(np.asarray(y_true, np.float32))
    if from_logits:
        logp = _log_softmax(y_pred)
    else:  # Keras: p / sum(p), clipped to [1e-7, 1 - 1e-7]
        p = _tensor.divide(y_pred, _tensor.reduce_sum(y_pred, axis=-1, keepdims=True))
        logp = _tensor.log(_clip(p))
    return _tensor.negative(_tensor.reduce_sum(_tensor.multiply(y_true, logp), axis=-1))


def _clip(p, eps=1e-7):
    # min(max(p, eps), 1 - eps) = eps + relu(p - eps) - relu(p - (1 - eps))
    return _tensor.subtract(_tensor.add(_tensor.relu(_tensor.subtract(p, eps)), eps),
                            _tensor.relu(_tensor.subtract(p, 1.0 - eps)))


def binary_crossentropy(y_true, y_pred, from_logits=False):
    y = _tensor.cast(y_true, float32) if _tensor.is_tensor(y_true) else \
        _tensor.convert_to_tensor(np.asarray(y_true, np.float32))
    if from_logits:
        # max(x, 0) - x y + log(1 + exp(-|x|)), which never overflows
        x = y_pred
        absx = _tensor.add(_tensor.relu(x), _tensor.relu(_tensor.negative(x)))
        per = _tensor.add(_tensor.subtract(_tensor.relu(x), _tensor.multiply(x, y)),
                          _tensor.log(_tensor.add(_tensor.exp(_tensor.negative(absx)), 1.0)))
    else:
        p = _clip(y_pred)
        per = _tensor.negative(_tensor.add(
            _tensor.multiply(y, _tensor.log(p)),
            _tensor.multiply(_tensor.subtract(1.0, y),
                             _tensor.log(_tensor.subtract(1.0, p)))))
    return _tensor.reduce_mean(per, axis=-1)


def mean_squared_error(y_true, y_pred):
    y = _tensor.cast(y_true, float32) if _tensor.is_tensor(y_true) else \
        _tensor.convert_to_tensor(np.asarray(y_true, np.float32))
    d = _tensor.subtract(y_pred, y)
    return _tensor.reduce_mean(_tensor.multiply(d, d), axis=-1)
