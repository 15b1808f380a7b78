"""ctypes bindings over sinter's public C API (include/sinter/*.h).

Only what the Keras layer above needs, declared once here: the structs mirror the headers
field for field, every function gets its argtypes/restype, and `check` turns an sn_status
into a Python exception carrying sn_last_error()'s message. ctypes releases the GIL around
every call into a CDLL, so training runs while other Python threads run too.

The library is found, in this order: $SINTER_LIBRARY (a path; the tests point it at a build
tree), libsinter.so beside this file (the wheel), and the system's libsinter.so.0.
"""
import ctypes as C
import ctypes.util
import os
import sys

# ---- loading ------------------------------------------------------------------------------


def _load():
    # libgomp reads its wait policy once, when it loads (with libsinter, below). Its default
    # spins 300,000 rounds between parallel regions, which on a shared machine makes a step
    # 50x slower; the `sinter` command sets GOMP_SPINCOUNT=1000 for itself for that reason
    # (docs/benchmarks-notes.md, "Threads"), and so does the package, unless the user chose.
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "1000"
    here = os.path.dirname(os.path.abspath(__file__))
    tried = []
    for path in (os.environ.get("SINTER_LIBRARY"), os.path.join(here, "libsinter.so"),
                 "libsinter.so.0"):
        if not path:
            continue
        try:
            return C.CDLL(path)
        except OSError as e:
            tried.append(f"{path}: {e}")
    raise ImportError("sinter: cannot load libsinter (" + "; ".join(tried) + "); install the "
                      "package with `pip install .` or set SINTER_LIBRARY to libsinter.so")


lib = _load()
libc = C.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)

# ---- status and errors --------------------------------------------------------------------

SN_OK, SN_ERR_INVALID, SN_ERR_SHAPE, SN_ERR_NOMEM, SN_ERR_IO, SN_ERR_FORMAT, \
    SN_ERR_NOT_FOUND, SN_ERR_UNSUPPORTED, SN_ERR_BACKEND, SN_ERR_DIST, SN_ERR_NUMERIC, \
    SN_ERR_STATE = range(12)


class SinterError(RuntimeError):
    """A failure of the C library that maps to no narrower Python exception."""


class UnsupportedError(ValueError, NotImplementedError):
    """Valid Keras, but not implemented in sinter (its message names the field and value).
    A ValueError too, as Keras raises for a config value it cannot build."""


# Which Python exception each status becomes (Python's own taxonomy: a bad value is a
# ValueError, shapes/dtypes that do not fit are ValueError as in Keras, a file is OSError).
_EXC = {
    SN_ERR_INVALID: ValueError,
    SN_ERR_SHAPE: ValueError,
    SN_ERR_NOMEM: MemoryError,
    SN_ERR_IO: OSError,
    SN_ERR_FORMAT: ValueError,
    SN_ERR_NOT_FOUND: ValueError,
    SN_ERR_UNSUPPORTED: UnsupportedError,
    SN_ERR_BACKEND: SinterError,
    SN_ERR_DIST: SinterError,
    SN_ERR_NUMERIC: FloatingPointError,
    SN_ERR_STATE: RuntimeError,
}

lib.sn_last_error.restype = C.c_char_p
lib.sn_last_error.argtypes = []
lib.sn_status_name.restype = C.c_char_p
lib.sn_status_name.argtypes = [C.c_int]


def last_error():
    return (lib.sn_last_error() or b"").decode("utf-8", "replace")


def error(status, what=None):
    """The exception for a failed status (the message of this thread's last failure)."""
    msg = last_error() or lib.sn_status_name(status).decode()
    if what:
        msg = f"{what}: {msg}"
    return _EXC.get(status, SinterError)(msg)


def check(status, what=None):
    if status != SN_OK:
        raise error(status, what)


def check_ptr(ptr, what):
    """For constructors that return NULL with sn_last_error() set."""
    if not ptr:
        raise _EXC[SN_ERR_INVALID](f"{what}: {last_error() or 'failed'}")
    return ptr


# ---- structs (the headers' layouts) ------------------------------------------------------

SN_MAX_DIMS = 6
SN_MAX_METRICS = 4
SN_MAX_OUTPUTS = 4
SN_LOGS_MAX = 2 * (1 + SN_MAX_OUTPUTS + SN_MAX_OUTPUTS * SN_MAX_METRICS) + 1
SN_LR_MAX_BOUNDARIES = 16
SN_F32, SN_BF16, SN_I32, SN_U8, SN_F64 = range(5)


class Shape(C.Structure):
    _fields_ = [("ndim", C.c_int), ("dim", C.c_int64 * SN_MAX_DIMS)]

    @classmethod
    def of(cls, dims):
        dims = tuple(int(d) for d in dims)
        if len(dims) > SN_MAX_DIMS:
            raise ValueError(f"shape {dims} has {len(dims)} dimensions; sinter supports at "
                             f"most {SN_MAX_DIMS}")
        s = cls()
        s.ndim = len(dims)
        for i, d in enumerate(dims):
            s.dim[i] = d
        return s

    def tuple(self):
        return tuple(int(self.dim[i]) for i in range(self.ndim))


class OptimizerOpts(C.Structure):
    _fields_ = [("type", C.c_int), ("learning_rate", C.c_double), ("beta_1", C.c_double),
                ("beta_2", C.c_double), ("epsilon", C.c_double), ("weight_decay", C.c_double),
                ("momentum", C.c_double), ("rho", C.c_double), ("nesterov", C.c_bool)]


class OutputLoss(C.Structure):
    _fields_ = [("loss", C.c_int), ("from_logits", C.c_bool), ("loss_weight", C.c_double),
                ("n_metrics", C.c_int), ("metrics", C.c_int * SN_MAX_METRICS)]


class CompileOpts(C.Structure):
    _fields_ = [("optimizer", OptimizerOpts), ("loss", C.c_int), ("from_logits", C.c_bool),
                ("n_metrics", C.c_int), ("metrics", C.c_int * SN_MAX_METRICS),
                ("steps_per_execution", C.c_int), ("mixed_bfloat16", C.c_bool),
                ("predict_raw", C.c_bool), ("device", C.c_char * 96), ("fp32_strict", C.c_bool),
                ("huber_delta", C.c_double),
                ("accuracy_threshold", C.c_double), ("n_outputs", C.c_int),
                ("outputs", OutputLoss * SN_MAX_OUTPUTS)]


class Logs(C.Structure):
    _fields_ = [("epoch", C.c_int), ("step", C.c_int64), ("steps", C.c_int64), ("n", C.c_int),
                ("names", C.c_char_p * SN_LOGS_MAX), ("values", C.c_double * SN_LOGS_MAX),
                ("seconds", C.c_double)]

    def dict(self):
        return {self.names[i].decode(): float(self.values[i]) for i in range(self.n)}


ON_EPOCH_BEGIN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int, C.c_int)
ON_BATCH_BEGIN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int, C.c_int64)
ON_BATCH_END = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(Logs), C.POINTER(C.c_bool))
ON_EPOCH_END = ON_BATCH_END
ON_TRAIN_END = C.CFUNCTYPE(None, C.c_void_p)
ON_TRAIN_BEGIN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p)
GET_STATE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_double), C.c_int)
SET_STATE = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_double), C.c_int)
ON_TEST_BEGIN = C.CFUNCTYPE(C.c_int, C.c_void_p)
ON_TEST_BATCH_BEGIN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int64)
ON_TEST_BATCH_END = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(Logs))
ON_TEST_END = ON_TEST_BATCH_END
LR_SCHEDULE_FN = C.CFUNCTYPE(C.c_double, C.c_void_p, C.c_int, C.c_double)


class Callback(C.Structure):
    _fields_ = [("user", C.c_void_p), ("on_epoch_begin", ON_EPOCH_BEGIN),
                ("on_batch_end", ON_BATCH_END), ("on_epoch_end", ON_EPOCH_END),
                ("on_train_end", ON_TRAIN_END), ("on_train_begin", ON_TRAIN_BEGIN),
                ("state_name", C.c_char_p), ("get_state", GET_STATE),
                ("set_state", SET_STATE), ("on_batch_begin", ON_BATCH_BEGIN),
                ("on_test_begin", ON_TEST_BEGIN), ("on_test_batch_begin", ON_TEST_BATCH_BEGIN),
                ("on_test_batch_end", ON_TEST_BATCH_END), ("on_test_end", ON_TEST_END)]


class BackupOpts(C.Structure):
    _fields_ = [("dir", C.c_char_p), ("every_steps", C.c_int64), ("keep", C.c_int),
                ("resume", C.c_bool), ("resume_path", C.c_char_p), ("log", C.c_void_p)]


class FitOpts(C.Structure):
    _fields_ = [("epochs", C.c_int), ("initial_epoch", C.c_int), ("steps_per_epoch", C.c_int64),
                ("validation", C.c_void_p), ("validation_steps", C.c_int64),
                ("n_callbacks", C.c_int), ("callbacks", C.POINTER(C.c_void_p)),
                ("backup", C.POINTER(BackupOpts))]


class ModelCheckpointOpts(C.Structure):
    _fields_ = [("filepath", C.c_char_p), ("monitor", C.c_char_p), ("mode", C.c_char_p),
                ("save_best_only", C.c_bool), ("save_weights_only", C.c_bool)]


class ReduceLROpts(C.Structure):
    _fields_ = [("monitor", C.c_char_p), ("factor", C.c_double), ("patience", C.c_int),
                ("mode", C.c_char_p), ("min_delta", C.c_double), ("cooldown", C.c_int),
                ("min_lr", C.c_double)]


class TensorBoardOpts(C.Structure):
    _fields_ = [("log_dir", C.c_char_p), ("update_freq", C.c_int64),
                ("histogram_freq", C.c_int)]


class LRSchedule(C.Structure):
    _fields_ = [("type", C.c_int), ("initial_learning_rate", C.c_double),
                ("decay_steps", C.c_int64), ("decay_rate", C.c_double),
                ("staircase", C.c_bool), ("n_boundaries", C.c_int),
                ("boundaries", C.c_int64 * SN_LR_MAX_BOUNDARIES),
                ("values", C.c_double * (SN_LR_MAX_BOUNDARIES + 1)), ("alpha", C.c_double),
                ("warmup_steps", C.c_int64), ("warmup_target", C.c_double)]


class DeviceInfo(C.Structure):
    _fields_ = [("name", C.c_char * 96), ("kind", C.c_int), ("index", C.c_int),
                ("threads", C.c_int), ("memory_bytes", C.c_longlong)]


class ModelFileInfo(C.Structure):
    _fields_ = [("has_compile", C.c_bool), ("compile", CompileOpts), ("has_weights", C.c_bool),
                ("keras_version", C.c_char * 32), ("input_shape", Shape)]


class TFRecordImageSpec(C.Structure):
    _fields_ = [("image_key", C.c_char_p), ("label_key", C.c_char_p), ("image_shape", Shape)]


# ---- functions ----------------------------------------------------------------------------

P = C.c_void_p
PP = C.POINTER(C.c_void_p)
S = C.c_int  # sn_status
I64 = C.c_int64
_SIGS = {
    # tensor.h
    "sn_tensor_from_data": (S, [PP, C.c_int, C.POINTER(Shape), P]),
    "sn_tensor_new": (S, [PP, C.c_int, C.POINTER(Shape)]),
    "sn_tensor_free": (None, [P]),
    "sn_tensor_dtype": (C.c_int, [P]),
    "sn_tensor_shape": (C.POINTER(Shape), [P]),
    "sn_tensor_data": (P, [P]),
    "sn_tensor_numel": (I64, [P]),
    "sn_tensor_is_contiguous": (C.c_bool, [P]),
    # data.h
    "sn_mnist_load": (S, [C.c_char_p, C.c_char_p, PP, PP]),
    "sn_dataset_from_tensors": (S, [PP, C.c_int, PP]),
    "sn_dataset_map_cast": (S, [PP, C.c_int, C.c_int]),
    "sn_dataset_map_normalize": (S, [PP, C.c_int, C.c_bool]),
    "sn_dataset_shuffle": (S, [PP, I64, C.c_uint64, C.c_bool]),
    "sn_dataset_repeat": (S, [PP, I64]),
    "sn_dataset_batch": (S, [PP, I64, C.c_bool]),
    "sn_dataset_cache": (S, [PP]),
    "sn_dataset_prefetch": (S, [PP, C.c_int]),
    "sn_dataset_take": (S, [PP, I64]),
    "sn_dataset_skip": (S, [PP, I64]),
    "sn_dataset_shard": (S, [PP, I64, I64]),
    "sn_dataset_next": (S, [P, PP, C.POINTER(C.c_bool)]),
    "sn_dataset_reset": (S, [P]),
    "sn_dataset_num_components": (C.c_int, [P]),
    "sn_dataset_cardinality": (I64, [P]),
    "sn_dataset_free": (None, [P]),
    "sn_tfrecord_image_spec_defaults": (TFRecordImageSpec, []),
    "sn_dataset_from_tfrecord_images": (S, [PP, C.POINTER(C.c_char_p), C.c_int,
                                            C.POINTER(TFRecordImageSpec)]),
    # device.h
    "sn_device_configure_cpu": (S, [C.c_int]),
    "sn_device_count": (C.c_int, []),
    "sn_device_get": (S, [C.c_int, C.POINTER(DeviceInfo)]),
    "sn_device_find": (S, [C.c_char_p, C.POINTER(C.c_int)]),
    "sn_num_threads": (C.c_int, []),
    "sn_set_num_threads": (None, [C.c_int]),
    # dist.h
    "sn_strategy_one_device": (S, [C.c_char_p, PP]),
    "sn_strategy_mirrored": (S, [C.c_int, C.POINTER(C.c_char_p), PP]),
    "sn_strategy_multi_worker": (S, [C.c_int, PP]),
    "sn_strategy_free": (None, [P]),
    "sn_strategy_name": (C.c_char_p, [P]),
    "sn_strategy_num_replicas": (C.c_int, [P]),
    "sn_strategy_local_replicas": (C.c_int, [P]),
    "sn_strategy_replica_device": (C.c_char_p, [P, C.c_int]),
    "sn_strategy_worker_rank": (C.c_int, [P]),
    "sn_strategy_num_workers": (C.c_int, [P]),
    "sn_model_set_strategy": (S, [P, P]),
    # nn.h: models
    "sn_model_free": (None, [P]),
    "sn_model_summary": (S, [P, P]),
    "sn_model_param_count": (I64, [P, C.c_bool]),
    "sn_model_set_layer_trainable": (S, [P, C.c_int, C.c_bool]),
    "sn_model_set_trainable": (S, [P, C.c_bool]),
    "sn_model_layer_trainable": (C.c_bool, [P, C.c_int]),
    "sn_model_set_nested_trainable": (S, [P, C.c_char_p, C.c_bool]),
    "sn_model_reset_states": (None, [P]),
    "sn_model_graph": (P, [P]),
    "sn_model_layer_count": (C.c_int, [P]),
    "sn_model_layer_name": (C.c_char_p, [P, C.c_int]),
    "sn_model_layer_class": (C.c_char_p, [P, C.c_int]),
    "sn_model_layer_output_shape": (Shape, [P, C.c_int]),
    "sn_model_layer_variables": (C.c_int, [P, C.c_int, C.POINTER(C.c_int32), C.c_int]),
    "sn_model_input_shape": (Shape, [P]),
    "sn_model_output_shape": (Shape, [P]),
    "sn_model_input_count": (C.c_int, [P]),
    "sn_model_output_count": (C.c_int, [P]),
    "sn_model_output_shape_at": (Shape, [P, C.c_int]),
    "sn_model_from_json": (S, [C.c_char_p, C.c_size_t, C.c_uint64, PP,
                               C.POINTER(ModelFileInfo)]),
    "sn_model_load": (S, [C.c_char_p, C.c_uint64, PP, C.POINTER(ModelFileInfo)]),
    "sn_model_save": (S, [P, C.c_char_p]),
    "sn_model_to_json": (S, [P, C.POINTER(C.c_void_p)]),
    "sn_model_save_weights": (S, [P, C.c_char_p]),
    "sn_model_load_weights": (S, [P, C.c_char_p]),
    # nn.h: training
    "sn_compile_defaults": (CompileOpts, []),
    "sn_optimizer_defaults": (OptimizerOpts, [C.c_int]),
    "sn_model_compile": (S, [P, C.POINTER(CompileOpts)]),
    "sn_fit_defaults": (FitOpts, []),
    "sn_model_fit": (S, [P, P, C.POINTER(FitOpts), PP]),
    "sn_model_evaluate": (S, [P, P, I64, C.POINTER(C.c_double), C.c_int, C.POINTER(C.c_int)]),
    "sn_model_evaluate_cb": (S, [P, P, I64, C.c_int, C.POINTER(C.c_void_p),
                                 C.POINTER(C.c_double), C.c_int, C.POINTER(C.c_int)]),
    "sn_model_predict_prepare": (S, [P, I64]),
    "sn_model_predict_into": (S, [P, I64, P, P]),
    "sn_model_predict_n": (S, [P, C.c_int, C.POINTER(C.c_void_p), C.c_int,
                               C.POINTER(C.c_void_p)]),
    "sn_model_set_learning_rate": (S, [P, C.c_double]),
    "sn_model_get_learning_rate": (C.c_double, [P]),
    # nn.h: callbacks
    "sn_callback_progress_bar": (P, [P, C.c_int]),
    "sn_callback_csv_logger": (P, [C.c_char_p]),
    "sn_callback_early_stopping": (P, [C.c_char_p, C.c_double, C.c_int]),
    "sn_callback_terminate_on_nan": (P, []),
    "sn_tensorboard_defaults": (TensorBoardOpts, []),
    "sn_callback_tensorboard": (P, [C.POINTER(TensorBoardOpts)]),
    "sn_model_checkpoint_defaults": (ModelCheckpointOpts, [C.c_char_p]),
    "sn_callback_model_checkpoint": (P, [C.POINTER(ModelCheckpointOpts)]),
    "sn_reduce_lr_defaults": (ReduceLROpts, []),
    "sn_callback_reduce_lr_on_plateau": (P, [C.POINTER(ReduceLROpts)]),
    "sn_callback_lr_scheduler": (P, [LR_SCHEDULE_FN, P]),
    "sn_lr_schedule_check": (S, [C.POINTER(LRSchedule)]),
    "sn_lr_schedule_value": (C.c_double, [C.POINTER(LRSchedule), I64]),
    "sn_callback_lr_schedule": (P, [C.POINTER(LRSchedule)]),
    "sn_backup_defaults": (BackupOpts, []),
    "sn_callback_free": (None, [P]),
    # graph.h: variables
    "sn_graph_variables": (C.c_int, [P, C.c_bool, C.POINTER(C.c_int32), C.c_int]),
    "sn_variable_data": (P, [P, C.c_int32]),
    "sn_node_shape": (Shape, [P, C.c_int32]),
    "sn_node_dtype": (C.c_int, [P, C.c_int32]),
    "sn_node_name": (C.c_char_p, [P, C.c_int32]),
}
for _name, (_res, _args) in _SIGS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args

# ---- C streams: summary text and the progress bar ----------------------------------------

libc.open_memstream.restype = P
libc.open_memstream.argtypes = [C.POINTER(C.c_void_p), C.POINTER(C.c_size_t)]
libc.fclose.argtypes = [P]
libc.fflush.argtypes = [P]
libc.free.argtypes = [P]
libc.fdopen.restype = P
libc.fdopen.argtypes = [C.c_int, C.c_char_p]
libc.dup.argtypes = [C.c_int]


def capture(fn):
    """Runs fn(FILE *) on an in-memory stream and returns what it wrote, as str."""
    buf, size = C.c_void_p(), C.c_size_t()
    f = libc.open_memstream(C.byref(buf), C.byref(size))
    if not f:
        raise MemoryError("open_memstream failed")
    try:
        fn(f)
    finally:
        libc.fclose(f)
        text = C.string_at(buf, size.value).decode("utf-8", "replace") if buf else ""
        libc.free(buf)
    return text


# fopencookie: a FILE * whose writes go to a Python text stream (sys.stdout in a notebook is
# no file descriptor). Its fileno is -1, so the C progress bar sees no terminal and writes one
# line per epoch, as Keras does outside a terminal.
_WRITE = C.CFUNCTYPE(C.c_ssize_t, C.c_void_p, C.POINTER(C.c_char), C.c_size_t)
_READ = C.CFUNCTYPE(C.c_ssize_t, C.c_void_p, C.c_void_p, C.c_size_t)
_SEEK = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_int)
_CLOSE = C.CFUNCTYPE(C.c_int, C.c_void_p)


class _CookieIO(C.Structure):
    _fields_ = [("read", _READ), ("write", _WRITE), ("seek", _SEEK), ("close", _CLOSE)]


libc.fopencookie.restype = P
libc.fopencookie.argtypes = [P, C.c_char_p, _CookieIO]


class CStream:
    """A C FILE * that writes to the Python stream `out` (kept alive while in use).

    On a terminal that is the process's own file descriptor the FILE * is that descriptor
    (a dup), so the progress bar redraws in place; anywhere else writes go through Python."""

    def __init__(self, out=None):
        out = out if out is not None else sys.stdout
        self.out = out
        self._cb = None
        fd = None
        try:
            if out.isatty():
                fd = out.fileno()
        except (AttributeError, OSError, ValueError):
            fd = None
        if fd is not None:
            out.flush()
            self.f = libc.fdopen(libc.dup(fd), b"w")
        else:
            def write(_cookie, buf, size):
                try:
                    out.write(C.string_at(buf, size).decode("utf-8", "replace"))
                    out.flush()
                except Exception:  # a broken stream must not kill training from C
                    return 0
                return size
            self._cb = _CookieIO(_READ(), _WRITE(write), _SEEK(), _CLOSE())
            self.f = libc.fopencookie(None, b"w", self._cb)
        if not self.f:
            raise OSError(C.get_errno(), "cannot open a C stream for the progress bar")

    def close(self):
        if self.f:
            libc.fclose(self.f)
            self.f = None
