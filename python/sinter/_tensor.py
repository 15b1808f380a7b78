"""Tensors with TensorFlow's names (issue 25): eager tensors, symbolic tensors inside a traced
`sinter.function`, dtypes, `sinter.device`, and the ops the TPU guide uses.

Every op is one builder over the C graph (include/sinter/graph.h). Inside a trace it adds its
node to the function's graph; eagerly it builds a one-op graph holding its inputs as constants
and evaluates it with sn_eval on the current device, so eager float work runs on sinter too.
Only int64 (which the C graph has no dtype for) and Python-side bookkeeping use NumPy.
"""
import contextlib
import ctypes as C
import threading

import numpy as np

from . import _lib

lib = _lib.lib
check = _lib.check
P, I32, NODE = C.c_void_p, C.c_int, C.c_int32
SHAPE_P = C.POINTER(_lib.Shape)


class Conv2dOpts(C.Structure):
    _fields_ = [("stride_h", C.c_int), ("stride_w", C.c_int), ("padding", C.c_int)]


class Pool2dOpts(C.Structure):
    _fields_ = [("pool_h", C.c_int), ("pool_w", C.c_int), ("stride_h", C.c_int),
                ("stride_w", C.c_int), ("padding", C.c_int)]


class PlanOpts(C.Structure):
    _fields_ = [("device", C.c_char_p), ("reuse_buffers", C.c_bool), ("bf16_compute", C.c_bool),
                ("private_vars", C.c_bool), ("fp32_strict", C.c_bool), ("memory", C.c_void_p)]


FEED_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_int64)


class ReplicaInput(C.Structure):  # sn_replica_input (sinter/dist.h)
    _fields_ = [("replica", C.c_int), ("node", C.c_int32), ("data", C.c_void_p),
                ("bytes", C.c_size_t)]


NEXT_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int64, C.POINTER(C.POINTER(ReplicaInput)),
                      C.POINTER(C.c_int))

_SIGS = {
    "sn_graph_new": (P, []), "sn_graph_free": (None, [P]), "sn_graph_status": (I32, [P]),
    "sn_input": (NODE, [P, C.c_char_p, I32, SHAPE_P]),
    "sn_variable": (NODE, [P, C.c_char_p, I32, SHAPE_P, C.c_bool]),
    "sn_const": (NODE, [P, I32, SHAPE_P, P]), "sn_scalar": (NODE, [P, I32, C.c_double]),
    "sn_matmul": (NODE, [P, NODE, NODE, C.c_bool, C.c_bool]),
    "sn_bias_add": (NODE, [P, NODE, NODE]),
    "sn_sparse_softmax_xent": (NODE, [P, NODE, NODE]),
    "sn_sparse_accuracy": (NODE, [P, NODE, NODE]),
    "sn_reduce_sum": (NODE, [P, NODE, I32, C.POINTER(C.c_int), C.c_bool]),
    "sn_reduce_mean": (NODE, [P, NODE, I32, C.POINTER(C.c_int), C.c_bool]),
    "sn_reshape": (NODE, [P, NODE, SHAPE_P]),
    "sn_conv2d": (NODE, [P, NODE, NODE, C.POINTER(Conv2dOpts)]),
    "sn_conv2d_opts_defaults": (Conv2dOpts, []),
    "sn_max_pool2d": (NODE, [P, NODE, C.POINTER(Pool2dOpts)]),
    "sn_avg_pool2d": (NODE, [P, NODE, C.POINTER(Pool2dOpts)]),
    "sn_pool2d_opts_defaults": (Pool2dOpts, []),
    "sn_dropout": (NODE, [P, NODE, C.c_double, C.c_uint64]),
    "sn_softmax": (NODE, [P, NODE, I32]), "sn_log_softmax": (NODE, [P, NODE, I32]),
    "sn_cast": (NODE, [P, NODE, I32]),
    "sn_assign": (NODE, [P, NODE, NODE]), "sn_assign_add": (NODE, [P, NODE, NODE]),
    "sn_gradients": (I32, [P, NODE, I32, C.POINTER(NODE), C.POINTER(NODE)]),
    "sn_plan_opts_defaults": (PlanOpts, []),
    "sn_plan_memory_new": (P, []), "sn_plan_memory_free": (None, [P]),
    "sn_plan_memory_size": (C.c_size_t, [P]), "sn_plan_peak_bytes": (C.c_size_t, [P]),
    "sn_plan_new": (I32, [C.POINTER(P), P, I32, C.POINTER(NODE), C.POINTER(PlanOpts)]),
    "sn_plan_free": (None, [P]),
    "sn_plan_run": (I32, [P, C.c_int64, FEED_FN, P]),
    "sn_plan_buffer": (P, [P, NODE]),
    "sn_plan_set_input": (I32, [P, NODE, P, C.c_size_t]),
    "sn_plan_run_count": (C.c_int64, [P]),
    "sn_eval": (I32, [P, NODE, C.c_char_p, C.POINTER(P)]),
    "sn_graph_node_count": (I32, [P]),
    "sn_optimizer_slot_count": (I32, [C.POINTER(_lib.OptimizerOpts)]),
    "sn_optimizer_slot_name": (C.c_char_p, [C.POINTER(_lib.OptimizerOpts), I32]),
    "sn_optimizer_update": (I32, [P, C.POINTER(_lib.OptimizerOpts), NODE, NODE, NODE,
                                  C.POINTER(NODE), C.POINTER(NODE)]),
    "sn_strategy_shares_variables": (C.c_bool, [P]),
    "sn_strategy_all_reduce_node": (I32, [P, P, NODE, I32, C.POINTER(NODE)]),
    "sn_strategy_barrier_node": (I32, [P, P, NODE, I32, C.POINTER(NODE)]),
    "sn_strategy_run_plans": (I32, [P, C.POINTER(P), C.c_int64, NEXT_FN, P]),
}
for _n in ("sn_add", "sn_sub", "sn_mul", "sn_div"):
    _SIGS[_n] = (NODE, [P, NODE, NODE])
for _n in ("sn_relu", "sn_sigmoid", "sn_tanh", "sn_exp", "sn_log", "sn_sqrt", "sn_neg",
           "sn_flatten"):
    _SIGS[_n] = (NODE, [P, NODE])
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args


# ---- dtypes ---------------------------------------------------------------------------------

class DType:
    def __init__(self, name, np_dtype, sn):
        self.name, self.as_numpy_dtype, self.sn = name, np_dtype, sn

    @property
    def is_floating(self):
        return self.name in ("float32", "float64", "bfloat16", "float16")

    @property
    def is_integer(self):
        return self.name.startswith(("int", "uint"))

    def __repr__(self):
        return f"tf.{self.name}"

    __str__ = __repr__


float32 = DType("float32", np.float32, _lib.SN_F32)
float64 = DType("float64", np.float64, _lib.SN_F64)
bfloat16 = DType("bfloat16", None, _lib.SN_BF16)  # graph-only: NumPy has no bfloat16
int32 = DType("int32", np.int32, _lib.SN_I32)
int64 = DType("int64", np.int64, None)            # host-only: the C graph has no int64
uint8 = DType("uint8", np.uint8, _lib.SN_U8)
bool_ = DType("bool", np.bool_, None)
_ALL = [float32, float64, bfloat16, int32, int64, uint8, bool_]
_BY_SN = {d.sn: d for d in _ALL if d.sn is not None}


def as_dtype(d):
    if d is None or isinstance(d, DType):
        return d
    if isinstance(d, str):
        for t in _ALL:
            if t.name == d:
                return t
        raise TypeError(f"dtype {d!r}: sinter has " + ", ".join(t.name for t in _ALL))
    nd = np.dtype(d)
    for t in _ALL:
        if t.as_numpy_dtype is not None and np.dtype(t.as_numpy_dtype) == nd:
            return t
    raise TypeError(f"dtype {nd}: sinter has " + ", ".join(t.name for t in _ALL))


def _graph_dtype(d):
    """The C dtype a value of d is held in inside a graph (int64 as int32: labels, counters)."""
    if d.sn is not None:
        return d.sn
    if d is int64:
        return _lib.SN_I32
    raise TypeError(f"dtype {d.name}: the C graph has no such dtype")


# ---- devices --------------------------------------------------------------------------------

_local = threading.local()


def _device_stack():
    if not hasattr(_local, "devices"):
        _local.devices = []
    return _local.devices


def _canonical_device(name):
    """'/TPU:0', 'cpu:3', '/device:CPU:3', '/job:localhost/replica:0/task:0/device:CPU:3' ->
    ('CPU', 3)."""
    s = str(name).strip()
    tail = s.split("device:")[-1].lstrip("/")
    kind, _, idx = tail.partition(":")
    kind = kind.upper()
    if kind not in ("CPU", "GPU") or not idx.isdigit():
        raise ValueError(f"device {name!r}: expected a name like '/CPU:0' or '/GPU:1' "
                         "(sinter has CPU and GPU devices)")
    found = C.c_int()
    check(lib.sn_device_find(f"{kind.lower()}:{idx}".encode(), C.byref(found)),
          f"device {name!r}")
    return kind, int(idx)


def _full_name(kind_idx):
    return f"/job:localhost/replica:0/task:0/device:{kind_idx[0]}:{kind_idx[1]}"


def current_device():
    s = _device_stack()
    return s[-1] if s else ("CPU", 0)


@contextlib.contextmanager
def device(name):
    """Places the ops created inside on the device (eager ops run there; a traced function
    called inside runs its plan there)."""
    _device_stack().append(_canonical_device(name) if name else current_device())
    try:
        yield
    finally:
        _device_stack().pop()


def _c_device(kind_idx):
    return f"{kind_idx[0].lower()}:{kind_idx[1]}".encode()


# ---- tensors --------------------------------------------------------------------------------

def _shape_str(shape):
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + \
        ("," if len(shape) == 1 else "") + ")"


class TensorShape(tuple):
    def as_list(self):
        return list(self)

    @property
    def rank(self):
        return len(self)

    def __str__(self):
        return _shape_str(self)


class _Ops:
    """Operators shared by eager and symbolic tensors."""

    def __add__(self, o):
        return add(self, o)

    def __radd__(self, o):
        return add(o, self)

    def __sub__(self, o):
        return subtract(self, o)

    def __rsub__(self, o):
        return subtract(o, self)

    def __mul__(self, o):
        return multiply(self, o)

    def __rmul__(self, o):
        return multiply(o, self)

    def __truediv__(self, o):
        return divide(self, o)

    def __rtruediv__(self, o):
        return divide(o, self)

    def __matmul__(self, o):
        return matmul(self, o)

    def __rmatmul__(self, o):
        return matmul(o, self)

    def __neg__(self):
        return negative(self)

    @property
    def ndim(self):
        return len(self.shape)


class EagerTensor(_Ops):
    """A value: a NumPy array (bfloat16 is not offered eagerly) and the device it was made on."""

    def __init__(self, value, dtype, dev=None):
        self._value = value
        self._dtype = dtype
        self._dev = dev or current_device()

    def numpy(self):
        return self._value.copy() if isinstance(self._value, np.ndarray) else self._value

    @property
    def shape(self):
        return TensorShape(np.shape(self._value))

    @property
    def dtype(self):
        return self._dtype

    @property
    def device(self):
        return _full_name(self._dev)

    def get_shape(self):
        return self.shape

    def _text(self, is_repr):
        text = repr(self._value) if is_repr else str(self._value)
        return "\n" + text if "\n" in text else text

    def __str__(self):
        return f"tf.Tensor({self._text(False)}, shape={_shape_str(self.shape)}, " \
            f"dtype={self._dtype.name})"

    def __repr__(self):
        return f"<tf.Tensor: shape={_shape_str(self.shape)}, dtype={self._dtype.name}, " \
            f"numpy={self._text(True)}>"

    def __float__(self):
        return float(self._value)

    def __int__(self):
        return int(self._value)

    def __index__(self):
        return int(self._value)

    def __bool__(self):
        return bool(self._value)

    def __len__(self):
        return len(self._value)

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._value, dtype)

    def __format__(self, spec):
        return format(self._value.item() if np.ndim(self._value) == 0 else str(self), spec)

    def __iter__(self):
        for v in self._value:
            yield EagerTensor(np.asarray(v), self._dtype, self._dev)

    def __getitem__(self, i):
        return EagerTensor(np.asarray(self._value[i]), self._dtype, self._dev)


class SymbolicTensor(_Ops):
    """A node of the graph a `sinter.function` is being traced into."""

    def __init__(self, ctx, node, dtype=None):
        self._ctx = ctx
        self._node_id = node
        self._dtype = dtype

    def _node(self, ctx):
        if ctx is not self._ctx:
            raise ValueError("a tensor of one traced function is used in another (TensorFlow "
                             "forbids this too: pass it as an argument)")
        return self._node_id

    @property
    def shape(self):
        return TensorShape(lib.sn_node_shape(self._ctx.g, self._node(self._ctx)).tuple())

    @property
    def dtype(self):
        if self._dtype is not None:
            return self._dtype
        return _BY_SN[lib.sn_node_dtype(self._ctx.g, self._node(self._ctx))]

    @property
    def device(self):
        return _full_name(self._ctx.device)

    def get_shape(self):
        return self.shape

    def numpy(self):
        raise NotImplementedError("numpy() inside a traced sinter.function: the value exists "
                                  "only when the plan runs (as in TensorFlow)")

    def __bool__(self):
        raise TypeError("using a symbolic tensor as a Python bool inside a traced "
                        "sinter.function is not supported (sinter traces no control flow "
                        "except sinter.range)")

    def __repr__(self):
        return f"<tf.Tensor 'node{self._node_id}' shape={_shape_str(self.shape)} " \
            f"dtype={self.dtype.name}>"


class _ArgTensor(SymbolicTensor):
    """A tensor argument of a traced function: its input node is made at the first use, so an
    argument used only as sinter.range's count (the guide's `steps`) is never fed."""

    def __init__(self, ctx, value, index):
        super().__init__(ctx, None, value.dtype)
        self._shape_v = value.shape
        self.index = index

    @property
    def shape(self):
        return TensorShape(self._shape_v)

    def _node(self, ctx):
        if self._node_id is None:
            self._node_id = ctx.arg_input(self)
        return super()._node(ctx)


Tensor = (EagerTensor, SymbolicTensor)


def is_tensor(x):
    return isinstance(x, Tensor) or getattr(x, "_is_variable", False)


def _trace():
    from . import _function
    return _function.current_trace()


def convert_to_tensor(value, dtype=None, dtype_hint=None, name=None):
    dtype = as_dtype(dtype)
    if isinstance(value, SymbolicTensor) or getattr(value, "_is_variable", False):
        if dtype is not None and value.dtype is not dtype:
            raise ValueError(f"convert_to_tensor: a {value.dtype.name} tensor is not {dtype.name}"
                             " (use cast)")
        return value
    if isinstance(value, EagerTensor):
        if dtype is not None and value.dtype is not dtype:
            raise ValueError(f"convert_to_tensor: a {value.dtype.name} tensor is not {dtype.name}"
                             " (use cast)")
        return value
    a = np.asarray(value)
    if dtype is None:
        dtype = as_dtype(dtype_hint) if dtype_hint is not None else None
    if dtype is None:
        # TensorFlow's defaults: Python floats are float32, Python ints int32
        if a.dtype.kind == "f":
            dtype = float32 if not isinstance(value, np.ndarray) or a.dtype == np.float32 \
                else as_dtype(a.dtype)
        elif a.dtype.kind in "iu":
            dtype = int32 if not isinstance(value, np.ndarray) and not isinstance(
                value, np.generic) else as_dtype(a.dtype)
        elif a.dtype.kind == "b":
            dtype = bool_
        else:
            raise TypeError(f"convert_to_tensor: cannot convert {type(value).__name__} "
                            f"(NumPy dtype {a.dtype})")
    if dtype.as_numpy_dtype is None:
        raise NotImplementedError(f"eager {dtype.name} tensors: NumPy has no {dtype.name}; "
                                  "cast inside a sinter.function")
    if a.dtype.kind == "f" and dtype.is_integer:
        raise TypeError(f"convert_to_tensor: float values for a {dtype.name} tensor (use cast)")
    return EagerTensor(np.array(a, dtype.as_numpy_dtype, order="C"), dtype)


def constant(value, dtype=None, shape=None, name=None):
    t = convert_to_tensor(value, dtype)
    if shape is not None:
        t = EagerTensor(np.broadcast_to(t._value, tuple(shape)).copy(), t.dtype, t._dev)
    return t


# ---- running one op ---------------------------------------------------------------------------

def _const_node(g, t):
    a = np.array(t._value, order="C")
    if t.dtype is int64:
        a = a.astype(np.int32)
    return lib.sn_const(g, _graph_dtype(t.dtype), C.byref(_lib.Shape.of(a.shape)),
                        a.ctypes.data_as(P))


def _graph_error(g, what):
    st = lib.sn_graph_status(g)
    if st != _lib.SN_OK:
        raise _lib.error(st, what)


def _match(xs):
    """Python numbers take the dtype of the tensor they meet, as in TensorFlow."""
    ref = next((x.dtype for x in xs if is_tensor(x)), None)
    return [x if is_tensor(x) else convert_to_tensor(x, ref if ref is not None and not (
        ref.is_integer and isinstance(x, float)) else None) for x in xs]


def apply(what, build, *xs, numpy_fn=None, out_dtype=None):
    """Runs build(g, *nodes) -> node on xs: into the traced graph, or eagerly as a one-op
    graph evaluated on the current device (numpy_fn for dtypes the C graph lacks)."""
    xs = _match(list(xs))
    ctx = _trace()
    if ctx is not None:
        nodes = [ctx.node_of(x) for x in xs]
        n = build(ctx.g, *nodes)
        _graph_error(ctx.g, what)
        return SymbolicTensor(ctx, n, out_dtype)
    xs = [convert_to_tensor(x) for x in xs]
    if numpy_fn is not None and any(x.dtype.sn is None for x in xs):
        r = numpy_fn(*[x._value for x in xs])
        return EagerTensor(np.asarray(r), out_dtype or as_dtype(np.asarray(r).dtype))
    g = lib.sn_graph_new()
    if not g:
        raise MemoryError(f"{what}: out of memory")
    try:
        n = build(g, *[_const_node(g, x) for x in xs])
        _graph_error(g, what)
        dev = current_device()
        out = C.c_void_p()
        check(lib.sn_eval(g, n, _c_device(dev), C.byref(out)), what)
        try:
            from .keras.models import array_from_tensor
            arr = array_from_tensor(out)
        finally:
            lib.sn_tensor_free(out)
    finally:
        lib.sn_graph_free(g)
    dt = as_dtype(arr.dtype)
    if out_dtype is int64:
        arr, dt = arr.astype(np.int64), int64
    r = EagerTensor(arr, dt, dev)
    from . import _function
    if _function._tapes():  # an eager GradientTape records the op in its graph
        _function.tape_record(what, build, xs, r)
    return r


def _bin(what, fn, npf):
    def op(a, b, name=None):
        return apply(what, lambda g, x, y: fn(g, x, y), a, b, numpy_fn=npf)
    op.__name__ = what
    return op


add = _bin("add", lib.sn_add, np.add)
subtract = _bin("subtract", lib.sn_sub, np.subtract)
multiply = _bin("multiply", lib.sn_mul, np.multiply)


def divide(a, b, name=None):
    a, b = _match([a, b])
    if a.dtype.is_integer and b.dtype.is_integer:  # TensorFlow's truediv of ints: float64
        a, b = cast(a, float64), cast(b, float64)
    return apply("divide", lambda g, x, y: lib.sn_div(g, x, y), a, b, numpy_fn=np.divide)


def negative(x, name=None):
    return apply("negative", lambda g, n: lib.sn_neg(g, n), x, numpy_fn=np.negative)


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    return apply("matmul", lambda g, x, y: lib.sn_matmul(g, x, y, transpose_a, transpose_b),
                 a, b, numpy_fn=lambda x, y: np.matmul(x.T if transpose_a else x,
                                                       y.T if transpose_b else y))


def cast(x, dtype, name=None):
    dtype = as_dtype(dtype)
    x = convert_to_tensor(x) if not is_tensor(x) else x
    if x.dtype is dtype:
        return x
    ctx = _trace()
    if ctx is not None and (dtype.sn is None or x.dtype.sn is None):
        # int64 is held as int32 inside graphs: a cast between the two only relabels
        src, dst = _graph_dtype(x.dtype), _graph_dtype(dtype)
        if src == dst:
            return SymbolicTensor(ctx, ctx.node_of(x), dtype)
        return apply("cast", lambda g, n: lib.sn_cast(g, n, dst), x, out_dtype=dtype)
    if dtype.sn is None or x.dtype.sn is None:
        return EagerTensor(np.asarray(x._value).astype(dtype.as_numpy_dtype), dtype, x._dev)
    return apply("cast", lambda g, n: lib.sn_cast(g, n, dtype.sn), x)


def _unary(what, fn):
    def op(x, name=None):
        return apply(what, lambda g, n: fn(g, n), x)
    op.__name__ = what
    return op


exp = _unary("exp", lib.sn_exp)
log = _unary("log", lib.sn_log)
sqrt = _unary("sqrt", lib.sn_sqrt)
relu = _unary("relu", lib.sn_relu)
sigmoid = _unary("sigmoid", lib.sn_sigmoid)
tanh = _unary("tanh", lib.sn_tanh)


def _axes(axis):
    if axis is None:
        return 0, None
    axes = [axis] if isinstance(axis, int) else list(axis)
    return len(axes), (C.c_int * len(axes))(*axes)


def reduce_sum(x, axis=None, keepdims=False, name=None):
    n, arr = _axes(axis)
    return apply("reduce_sum", lambda g, v: lib.sn_reduce_sum(g, v, n, arr, keepdims), x,
                 numpy_fn=lambda v: np.sum(v, axis=axis, keepdims=keepdims))


def reduce_mean(x, axis=None, keepdims=False, name=None):
    n, arr = _axes(axis)
    return apply("reduce_mean", lambda g, v: lib.sn_reduce_mean(g, v, n, arr, keepdims), x,
                 numpy_fn=lambda v: np.mean(v, axis=axis, keepdims=keepdims))


def reshape(x, shape, name=None):
    s = _lib.Shape.of([-1 if d is None else d for d in shape])
    return apply("reshape", lambda g, v: lib.sn_reshape(g, v, C.byref(s)), x,
                 numpy_fn=lambda v: np.reshape(v, shape))


def size(x, out_type=int32):
    return constant(int(np.prod(x.shape)), out_type)
