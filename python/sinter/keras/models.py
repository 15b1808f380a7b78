"""keras.Sequential, keras.Model (Functional chains) and keras.models.load_model over a C
sn_model.

The Python model holds its layers' Keras configs until it knows its input shape; then it
writes the JSON Keras writes for the same model and the C reader builds it
(sn_model_from_json). Everything after that -- compile, fit, evaluate, predict, summary,
save -- is one C call (or one per predict chunk) on that model. Arrays are converted once per
call (np.copyto into C memory: any dtype, any strides), never per batch.
"""
import ctypes as C
import gc
import itertools
import json
import math
import os
import signal
import sys
import threading
import time
import weakref

import numpy as np

from .. import _lib
from .. import _random
from . import _naming
from . import callbacks as _callbacks
from . import layers as _layers
from . import losses as _losses
from . import metrics as _metrics
from . import optimizers as _optimizers
from . import mixed_precision as _mp

lib = _lib.lib
check = _lib.check

_NP_OF = {_lib.SN_F32: np.float32, _lib.SN_I32: np.int32, _lib.SN_U8: np.uint8,
          _lib.SN_F64: np.float64}
_CT_OF = {_lib.SN_F32: C.c_float, _lib.SN_I32: C.c_int32, _lib.SN_U8: C.c_uint8,
          _lib.SN_F64: C.c_double, _lib.SN_BF16: C.c_uint16}


# ---- tensors: numpy <-> C ------------------------------------------------------------------

def _np_view(ptr, shape, dtype):
    n = int(np.prod(shape)) if len(shape) else 1
    buf = (_CT_OF[dtype] * n).from_address(ptr)
    return np.ctypeslib.as_array(buf).view(_NP_OF[dtype]).reshape(shape)


def tensor_from_array(a, dtype):
    """A new sn_tensor holding `a` converted to dtype (one pass: np.copyto into C memory)."""
    a = np.asarray(a)
    t = C.c_void_p()
    check(lib.sn_tensor_new(C.byref(t), dtype, _lib.Shape.of(a.shape)), "array")
    try:
        np.copyto(_np_view(lib.sn_tensor_data(t), a.shape, dtype), a, casting="unsafe")
    except BaseException:
        lib.sn_tensor_free(t)
        raise
    return t


def array_from_tensor(t):
    """A numpy copy of a contiguous sn_tensor."""
    shape = lib.sn_tensor_shape(t).contents.tuple()
    return _np_view(lib.sn_tensor_data(t), shape, lib.sn_tensor_dtype(t)).copy()


def _dataset_from_arrays(arrays_dtypes):
    ts = []
    try:
        for a, dt in arrays_dtypes:
            ts.append(tensor_from_array(a, dt))
        arr = (C.c_void_p * len(ts))(*[t.value for t in ts])
        ds = C.c_void_p()
        check(lib.sn_dataset_from_tensors(C.byref(ds), len(ts), arr), "dataset")
        return ds
    finally:
        for t in ts:
            lib.sn_tensor_free(t)


class _CDataset:
    """An owned C dataset handle (freed with the object, or at close())."""

    def __init__(self, handle):
        self.h = handle
        self._fin = weakref.finalize(self, lib.sn_dataset_free, handle)

    def apply(self, fn, *args, what):
        check(fn(C.byref(self.h), *args), what)
        self._fin.detach()
        self._fin = weakref.finalize(self, lib.sn_dataset_free, self.h)

    def close(self):
        self._fin()


def _num_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


# ---- the model -----------------------------------------------------------------------------

# Every model with a C side. A model refers to itself through its layers (each holds the model
# its weights live in) and its History, so a model the program dropped waits for Python's cycle
# collector, which counts Python objects and does not see the C memory behind them (the training
# plans: 8 replicas of the guide's CNN took GBs). fit collects first when another model exists.
_models = weakref.WeakSet()


def _free_model(h, strategy_ref):
    if strategy_ref is not None:
        lib.sn_model_set_strategy(h, None)
    lib.sn_model_free(h)


class Model:
    """A Keras model over a C sn_model. Use Sequential, or Model(inputs, outputs) for a
    Functional chain (sinter's C side runs single chains: one input, each layer once)."""

    def __init__(self, *args, **kwargs):
        inputs = kwargs.pop("inputs", args[0] if len(args) > 0 else None)
        outputs = kwargs.pop("outputs", args[1] if len(args) > 1 else None)
        name = kwargs.pop("name", None)
        trainable = kwargs.pop("trainable", True)
        if kwargs:
            raise TypeError(f"Model: unexpected arguments {sorted(kwargs)}")
        self._init(name or _naming.unique("functional" if inputs is not None else
                                          _naming.snake_case(type(self).__name__)))
        self.trainable = trainable
        if inputs is not None or outputs is not None:
            self._init_functional(inputs, outputs)

    def _init_functional(self, inputs, outputs):
        """keras.Model(inputs, outputs): the graph of calls from the inputs to the outputs,
        written as Keras's Functional config; the C reader builds it with the C Functional
        builder (sn_functional_new, sn_functional_input, sn_layer_call,
        sn_functional_set_outputs)."""
        if isinstance(inputs, dict) or isinstance(outputs, dict):
            raise NotImplementedError("Model: inputs and outputs as dicts; give lists")
        self._fn_single_in = not isinstance(inputs, (list, tuple))
        self._fn_single_out = not isinstance(outputs, (list, tuple))
        ins = [inputs] if self._fn_single_in else list(inputs)
        outs = [outputs] if self._fn_single_out else list(outputs)
        for t in ins + outs:
            if not isinstance(t, _layers.KerasTensor):
                raise TypeError(f"Model(inputs, outputs): expected tensors from keras.Input and "
                                f"layer calls; got {type(t).__name__}")
        for t in ins:
            if t._args:
                raise ValueError(f"Model: input {t.name} is not a keras.Input tensor")
        self._fn_config, self._fn_objs = _functional_config(self.name, self.trainable, ins,
                                                            outs)
        self._fn_inputs, self._fn_outputs = ins, outs
        self._build(None)

    def _init(self, name):
        from .. import distribute
        self.name = name
        self._layers = []
        self._input = None
        self._h = None
        self._fin = None
        self._strategy = distribute._current()
        self._compile = None  # (CompileOpts, metric names, schedule) once compiled
        self._pending_compile = None
        self._pending_links = []  # models used as layers, linked once this one is built
        self._links = []  # (weakref to a model, names of the layers both hold): shared
        self._inner_models = []
        self._wtime = 0  # when the weights last changed (_CLOCK)
        self._fn_config = None
        self._fit_calls = 0
        self.stop_training = False
        self.history = None
        self.trainable = True

    # -- building -----------------------------------------------------------------------
    @property
    def built(self):
        return self._h is not None

    @property
    def layers(self):
        return list(self._layers)

    def _config_json(self, input_shape):
        if getattr(self, "_fn_config", None) is not None:
            return self._fn_config
        inp = self._input or _layers.InputLayer(shape=input_shape,
                                                name=_naming.unique("input_layer"))
        if inp.shape is None:
            inp.shape = tuple(input_shape)
        batch_shape = [inp.batch_size] + list(inp.shape)
        return {"module": "keras", "class_name": "Sequential",
                "config": {"name": self.name, "trainable": self.trainable,
                           "dtype": dict(_layers._FLOAT32),
                           "layers": [inp._serialize()] + [l._serialize() for l in
                                                           self._layers],
                           "build_input_shape": batch_shape},
                "registered_name": None, "build_config": {"input_shape": batch_shape}}

    def _build(self, input_shape):
        if self._h is not None:
            return
        functional = getattr(self, "_fn_config", None) is not None
        if not self._layers and not functional:
            raise ValueError(f"model '{self.name}' has no layers")
        text = json.dumps(self._config_json(
            None if functional else tuple(input_shape))).encode()
        h = C.c_void_p()
        info = _lib.ModelFileInfo()
        check(lib.sn_model_from_json(text, len(text), _random.next_seed(), C.byref(h),
                                     C.byref(info)), f"model '{self.name}'")
        self._adopt(h)
        if functional:
            self._layers = _functional_layers(h, self._fn_objs)
        c_index = {lib.sn_model_layer_name(h, i).decode(): i
                   for i in range(lib.sn_model_layer_count(h))}
        for l in self._layers:
            if isinstance(l, Model):  # a nested model: its weights are linked below
                if l not in self._pending_links:
                    self._pending_links.append(l)
            elif l.name in c_index:
                l._model = (self, c_index[l.name])
        for src in self._pending_links:  # a model used as a layer: share its weights
            _link(src, self)
        self._pending_links = []
        if self._pending_compile is not None:
            self._apply_compile(*self._pending_compile)
            self._pending_compile = None

    def _adopt(self, h):
        self._h = h
        strategy = self._strategy
        if strategy is not None:
            check(lib.sn_model_set_strategy(h, strategy._h), f"model '{self.name}'")
        # the finalizer holds the strategy so that it outlives the model
        self._fin = weakref.finalize(self, _free_model, h, strategy)
        _models.add(self)

    def build(self, input_shape):
        """Builds for inputs of input_shape (with the batch dimension, as Keras)."""
        self._build(tuple(input_shape)[1:])

    def _try_build(self):
        pass

    def _need_built(self, what):
        self._try_build()
        if self._h is None:
            raise ValueError(f"{what}: model '{self.name}' is not built yet; give the first "
                             "layer an input shape (keras.Input(shape)), call build(), or "
                             "fit/predict it on data first")

    # -- weights --------------------------------------------------------------------------
    def _vars(self, layer_index=None):
        g = lib.sn_model_graph(self._h)
        buf = (C.c_int32 * 256)()
        if layer_index is None:
            out = []
            for i in range(lib.sn_model_layer_count(self._h)):
                k = lib.sn_model_layer_variables(self._h, i, buf, 256)
                out += list(buf[:k])
            return g, out
        k = lib.sn_model_layer_variables(self._h, layer_index, buf, 256)
        return g, list(buf[:k])

    def _read(self, g, nodes):
        out = []
        for v in nodes:
            shape = lib.sn_node_shape(g, v).tuple()
            out.append(_np_view(lib.sn_variable_data(g, v), shape,
                                lib.sn_node_dtype(g, v)).copy())
        return out

    def _write(self, g, nodes, weights, what):
        weights = list(weights)
        if len(weights) != len(nodes):
            raise ValueError(f"{what}: expected {len(nodes)} weight arrays, got {len(weights)}")
        for v, w in zip(nodes, weights):
            shape = lib.sn_node_shape(g, v).tuple()
            w = np.asarray(w)
            if w.shape != shape:
                raise ValueError(f"{what}: variable '{lib.sn_node_name(g, v).decode()}' has "
                                 f"shape {shape}; got an array of shape {w.shape}")
        for v, w in zip(nodes, weights):
            shape = lib.sn_node_shape(g, v).tuple()
            np.copyto(_np_view(lib.sn_variable_data(g, v), shape, lib.sn_node_dtype(g, v)),
                      np.asarray(w), casting="unsafe")

    def get_weights(self):
        if self._h is None:
            return []
        self._sync()
        return self._read(*self._vars())

    def set_weights(self, weights):
        self._need_built("set_weights")
        self._sync()
        g, nodes = self._vars()
        self._write(g, nodes, weights, f"model '{self.name}'.set_weights")
        self._touch()

    def _layer_weights(self, i):
        self._sync()
        return self._read(*self._vars(i))

    def _set_layer_weights(self, i, weights):
        self._sync()
        g, nodes = self._vars(i)
        self._write(g, nodes, weights,
                    f"layer '{lib.sn_model_layer_name(self._h, i).decode()}'.set_weights")
        self._touch()

    # -- weights shared with models used as layers ----------------------------------------
    # Sequential([model, Softmax()]) and the like share the inner model's weights, as in
    # Keras: training or setting either changes both. Each C model owns its variables, so the
    # package keeps the shared layers equal: a model whose weights changed is stamped
    # (_touch), and before any use a model first takes the newer weights of the models it
    # shares layers with (_sync): one copy when use switches from one model to the other,
    # never one per batch.
    def _touch(self):
        self._wtime = next(_CLOCK)

    def _sync(self, seen=None):
        if not self._links or self._h is None:
            return
        seen = (seen or set()) | {id(self)}
        for ref, names in self._links:
            other = ref()
            if other is None or id(other) in seen or other._h is None:
                continue
            other._sync(seen)
            if other._wtime > self._wtime:
                _copy_layers(other, self, names)
                self._wtime = other._wtime

    @property
    def weights(self):
        return self.get_weights()

    @property
    def trainable_variables(self):  # sinter Variables over the C weights (issue 25)
        from .. import _function
        return _function.model_variables(self, trainable_only=True)

    def count_params(self):
        self._need_built("count_params")
        return int(lib.sn_model_param_count(self._h, False))

    def get_layer(self, name=None, index=None):
        if index is not None:
            return self._layers[index]
        for l in self._layers:
            if l.name == name:
                return l
        raise ValueError(f"no layer named {name!r}; the layers are "
                         f"{[l.name for l in self._layers]}")

    @property
    def input_shape(self):
        self._need_built("input_shape")
        if self._fn_config is not None and not self._fn_single_in:
            return [tuple(t.shape) for t in self._fn_inputs]
        return (None,) + lib.sn_model_input_shape(self._h).tuple()

    @property
    def output_shape(self):
        self._need_built("output_shape")
        if self._fn_config is not None and not self._fn_single_out:
            return [(None,) + lib.sn_model_output_shape_at(self._h, i).tuple()
                    for i in range(lib.sn_model_output_count(self._h))]
        return (None,) + lib.sn_model_output_shape(self._h).tuple()

    def _one_in_one_out(self, what):
        n_in, n_out = lib.sn_model_input_count(self._h), lib.sn_model_output_count(self._h)
        if n_in != 1 or n_out != 1:
            raise _lib.UnsupportedError(
                f"{what}: model '{self.name}' has {n_in} inputs and {n_out} outputs; sinter's "
                "fit, evaluate and predict take models of one input and one output so far "
                "(its summary, weights and files work)")

    # -- compile --------------------------------------------------------------------------
    def compile(self, optimizer="rmsprop", loss=None, loss_weights=None, metrics=None,
                weighted_metrics=None, run_eagerly=False, steps_per_execution=1,
                jit_compile="auto", auto_scale_loss=True):
        if weighted_metrics:
            raise NotImplementedError("compile: weighted_metrics are not implemented in sinter "
                                      "(sample weights weigh the loss; metrics stay unweighted)")
        opt = _optimizers.get(optimizer)
        o = lib.sn_compile_defaults()
        o.optimizer = opt._opts()
        names = []
        if loss is None:
            o.n_metrics = 0
            self._pending_compile = None
            self._compile = None
            self._loss_less = True
            return
        out_names = self._output_names()
        if len(out_names) > 1 or isinstance(loss, (list, tuple, dict)):
            lo = self._compile_outputs(o, out_names, loss, loss_weights, metrics, names)
        else:
            if loss_weights is not None:
                lw = _per_output(loss_weights, out_names, "loss_weights")[0]
                if lw != 1:
                    raise NotImplementedError("compile: loss_weights on a model of one output")
            lo = _losses.get(loss)
            o.loss, o.from_logits = lo._type, lo.from_logits
            o.huber_delta = getattr(lo, "delta", 1.0)
            ms = _metric_list(metrics)
            if isinstance(ms, dict) or (len(ms) == 1 and isinstance(ms[0], (list, tuple))):
                ms = _metric_list(_per_output(ms, out_names, "metrics")[0])
            if len(ms) > _lib.SN_MAX_METRICS:
                raise ValueError(f"compile: at most {_lib.SN_MAX_METRICS} metrics; got "
                                 f"{len(ms)}")
            o.n_metrics = len(ms)
            for i, m in enumerate(ms):
                t, n = _metrics.get(m)
                o.metrics[i] = t
                names.append(n)
        if steps_per_execution == "auto":
            steps_per_execution = 1
        o.steps_per_execution = int(steps_per_execution)
        o.mixed_bfloat16 = _mp.global_policy().name == "mixed_bfloat16"
        o.predict_raw = True  # Keras's predict: the model's output as it is
        sched = opt.learning_rate if isinstance(
            opt.learning_rate, _optimizers.schedules.LearningRateSchedule) else None
        self.optimizer, self.loss = opt, lo
        self._loss_less = False
        if self._h is None:
            self._pending_compile = (o, names, sched)
        else:
            self._apply_compile(o, names, sched)

    def _output_names(self):
        """Keras's output_names: the output layers' names."""
        if getattr(self, "_fn_config", None) is not None:
            return [t._layer.name for t in self._fn_outputs]
        return [self._layers[-1].name if self._layers else "output"]

    def _input_names(self):
        if getattr(self, "_fn_config", None) is not None:
            return [t._layer.name for t in self._fn_inputs]
        return [self._input.name if self._input is not None else "input_layer"]

    def _compile_outputs(self, o, out_names, loss, loss_weights, metrics, names):
        """compile's loss, loss_weights and metrics per output (lists in the model's output
        order or dicts by output name, as Keras takes them) into sn_compile_opts.outputs;
        names gets the logged names after "loss" in the C order: each output's loss, then each
        output's metrics ("<output>_loss", "<output>_<metric>")."""
        n = len(out_names)
        if n > _lib.SN_MAX_OUTPUTS:
            raise ValueError(f"compile: at most {_lib.SN_MAX_OUTPUTS} outputs; model "
                             f"'{self.name}' has {n}")
        losses = _per_output(loss, out_names, "loss")
        lws = _per_output(1.0 if loss_weights is None else loss_weights, out_names,
                          "loss_weights")
        if isinstance(metrics, (str, _metrics.Metric)) or (
                isinstance(metrics, (list, tuple)) and n > 1 and any(
                    isinstance(m, (str, _metrics.Metric)) for m in metrics)):
            raise ValueError("compile: a model of several outputs takes metrics per output: a "
                             "list of lists or a dict by output name, as Keras")
        mss = _per_output(metrics, out_names, "metrics") if metrics else [None] * n
        o.n_outputs = n
        deltas = set()
        first = None
        for k in range(n):
            if losses[k] is None:
                raise NotImplementedError(f"compile: output '{out_names[k]}' has no loss; "
                                          "sinter trains every output")
            lo = _losses.get(losses[k])
            first = first or lo
            ol = o.outputs[k]
            ol.loss, ol.from_logits = lo._type, lo.from_logits
            ol.loss_weight = float(1.0 if lws[k] is None else lws[k])
            if lo._type == _losses.HUBER:
                deltas.add(lo.delta)
            ms = _metric_list(mss[k])
            if len(ms) > _lib.SN_MAX_METRICS:
                raise ValueError(f"compile: at most {_lib.SN_MAX_METRICS} metrics per output; "
                                 f"got {len(ms)} for '{out_names[k]}'")
            ol.n_metrics = len(ms)
            for i, m in enumerate(ms):
                ol.metrics[i] = _metrics.get(m)[0]
        if len(deltas) > 1:
            raise NotImplementedError("compile: Huber losses of different deltas on one model")
        o.huber_delta = deltas.pop() if deltas else 1.0
        o.loss, o.from_logits = o.outputs[0].loss, o.outputs[0].from_logits
        o.n_metrics = 0
        if n > 1:
            names += [f"{nm}_loss" for nm in out_names]
        for k in range(n):
            for m in _metric_list(mss[k]):
                mn = _metrics.get(m)[1]
                names.append(f"{out_names[k]}_{mn}" if n > 1 else mn)
        return first

    def _apply_compile(self, o, names, sched):
        self._push_trainable()
        check(lib.sn_model_compile(self._h, C.byref(o)), f"compile model '{self.name}'")
        self._compile = (o, names, sched)

    def _push_trainable(self):
        """Keras's `trainable` of every layer and (nested) model, as set now, onto the C
        layers: a frozen layer's weights leave the trainable set at compile, as in Keras (where
        a change also takes effect at the next compile)."""
        flags, nested = {}, {}

        def walk(layers, on):
            for l in layers:
                t = on and bool(getattr(l, "trainable", True))
                if isinstance(l, Model):
                    nested[l.name] = t
                    walk(l._layers, t)
                else:
                    flags[l.name] = t

        walk(self._layers, bool(self.trainable))
        h, what = self._h, f"model '{self.name}'"
        if not self.trainable or getattr(self, "_c_frozen", False):
            # model.trainable = False freezes all; set back to True it thaws all (then the
            # layers' own flags below), as Keras's setter
            check(lib.sn_model_set_trainable(h, bool(self.trainable)), what)
        self._c_frozen = not self.trainable
        for n, t in nested.items():  # a nested model is written with its own flag; one that
            # the C model holds as plain layers (no nested record) refuses: its layers' flags
            # below are all there is to set
            lib.sn_model_set_nested_trainable(h, n.encode(), t)
        for i in range(lib.sn_model_layer_count(self._h)):
            n = lib.sn_model_layer_name(self._h, i).decode()
            if n in flags:
                check(lib.sn_model_set_layer_trainable(self._h, i, flags[n]),
                      f"model '{self.name}'")

    @property
    def metrics_names(self):
        return ["loss"] + (self._compile[1] if self._compile else [])

    # -- data ------------------------------------------------------------------------------
    def _label_dtype(self, k=0):
        o = self._compile[0] if self._compile else (
            self._pending_compile[0] if self._pending_compile else None)
        loss = o.outputs[k].loss if o is not None and o.n_outputs > 0 else (
            o.loss if o is not None else None)
        return _lib.SN_I32 if o is None or loss == _losses.SPARSE_CCE else _lib.SN_F32

    def _labels_n(self, y, n):
        """y for each output, in the model's output order: a list, or a dict by output name
        (as Keras takes them) -> [(array, dtype)]."""
        names = self._output_names()
        if len(names) == 1:
            if isinstance(y, dict):
                y = _per_output(y, names, "y")[0]
            elif isinstance(y, (list, tuple)) and len(y) == 1 and np.ndim(y[0]) >= 1 and \
                    len(y[0]) == n:
                y = y[0]  # [y]: the list of a single-output model's labels
            return [self._labels(y, n)]
        if not isinstance(y, (list, tuple, dict)):
            raise ValueError(f"y: model '{self.name}' has {len(names)} outputs {names}; give y "
                             "as a list of that many arrays or a dict by output name")
        ys = _per_output(y, names, "y")
        if any(v is None for v in ys):
            raise ValueError(f"y: every output needs labels; the outputs are {names}")
        return [self._labels(v, n, k) for k, v in enumerate(ys)]

    def _labels(self, y, n, k=0):
        y = np.asarray(y)
        if len(y) != n:
            raise ValueError(f"x has {n} samples but y has {len(y)}; they must match")
        dt = self._label_dtype(k)
        if dt == _lib.SN_I32:
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim != 1:
                raise ValueError(f"labels of shape {y.shape} for a sparse loss; expected "
                                 "integer class ids of shape (n,)")
            if y.dtype.kind == "f" and not np.all(np.equal(np.mod(y, 1), 0)):
                raise ValueError("labels for a sparse loss must be integer class ids")
        else:
            out = lib.sn_model_output_shape_at(self._h, k).tuple()
            if y.shape[1:] != out and int(np.prod(y.shape[1:], dtype=np.int64)) == \
                    int(np.prod(out, dtype=np.int64)):
                y = y.reshape((n,) + out)
        return y, dt

    def _arrays_dataset(self, x, y, batch_size, shuffle, seed, what, sample_weight=None):
        xs = x if isinstance(x, list) else [x]
        n = len(xs[0])
        cols = [(a, _lib.SN_F32) for a in xs] + self._labels_n(y, n)
        if sample_weight is not None:
            # Keras's sample_weight: a third dataset component, [n] f32, that the C plan
            # multiplies each example's loss by (sn_model_fit)
            cols.append((_sample_weights(sample_weight, n, what), _lib.SN_F32))
        h = _dataset_from_arrays(cols)
        ds = _CDataset(h)
        if shuffle:
            ds.apply(lib.sn_dataset_shuffle, n, seed, True, what=what)
        ds.apply(lib.sn_dataset_batch, int(batch_size), False, what=what)
        # As `sinter train` does (src/cli/data_setup.c): a prefetch thread only on a core the
        # kernels' threads leave free.
        if lib.sn_num_threads() < _num_cores():
            ds.apply(lib.sn_dataset_prefetch, 2, what=what)
        return ds

    def _input_of(self, x):
        """x as a Dataset, one array (a model of one input), or a list of arrays in the
        model's input order (from a list, or a dict by Input name, as Keras takes them)."""
        from ..data import Dataset
        if isinstance(x, Dataset):
            return x
        names = self._input_names()
        if isinstance(x, dict):
            x = _per_output(x, names, "x")
            if any(v is None for v in x):
                raise ValueError(f"x: every input needs data; the inputs are {names}")
        if len(names) > 1:
            if not isinstance(x, (list, tuple)) or len(x) != len(names):
                raise ValueError(f"model '{self.name}' has {len(names)} inputs {names}; give x "
                                 "as a list of that many arrays or a dict by input name")
            xs = [np.asarray(a) for a in x]
            for a in xs:
                if a.dtype == object:
                    raise TypeError("x must hold numeric arrays")
                if len(a) != len(xs[0]):
                    raise ValueError(f"the inputs have {[len(b) for b in xs]} samples; they "
                                     "must match")
            return xs
        if isinstance(x, (list, tuple)) and len(x) == 1 and isinstance(x[0], np.ndarray):
            x = x[0]  # [x]: the list of a single-input model's inputs
        x = np.asarray(x)
        if x.dtype == object:
            raise TypeError("x must be a numeric array")
        return x

    def _ensure_built_for(self, x):
        from ..data import Dataset
        self._try_build()
        if isinstance(x, list):  # several inputs: a Functional model, built; C checks shapes
            return
        if isinstance(x, Dataset):
            shape = tuple(x._element_shape(0))
        else:
            shape = tuple(x.shape[1:])
        if self._h is None:
            self._build(shape)
        want = lib.sn_model_input_shape(self._h).tuple()
        if shape != want:
            raise ValueError(f"model '{self.name}' expects inputs of shape "
                             f"{(None,) + want}; got {'a dataset of' if isinstance(x, Dataset) else 'an array of shape'} "
                             f"{(None,) + shape if isinstance(x, Dataset) else x.shape}")

    # -- fit ---------------------------------------------------------------------------------
    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, validation_steps=None,
            validation_batch_size=None, validation_freq=1):
        from ..data import Dataset
        if validation_freq != 1:
            raise NotImplementedError("fit: sinter validates after every epoch "
                                      "(validation_freq=1)")
        if self._compile is None and self._pending_compile is None:
            raise RuntimeError("You must call `compile()` before using the model "
                               "(with a loss to fit it).")
        x = self._input_of(x)
        self._ensure_built_for(x)
        batch_size = batch_size or 32
        seed = _random.fit_seed(self._fit_calls)
        self._fit_calls += 1
        owned = []
        try:
            if isinstance(x, Dataset):
                if y is not None:
                    raise ValueError("fit: y must be None when x is a dataset")
                if class_weight is not None or sample_weight is not None:
                    raise ValueError("fit: with a dataset, give sample weights as its third "
                                     "component (x, y, sample_weight), as Keras does")
                if validation_split:
                    raise ValueError("fit: validation_split is not supported for datasets")
                train = x._materialize()
                owned.append(train)
            else:
                if y is None:
                    raise ValueError("fit: y is required with array inputs")
                if not isinstance(y, (list, tuple, dict)):
                    y = np.asarray(y)
                if class_weight is not None and len(self._output_names()) > 1:
                    raise ValueError("`class_weight` is only supported for Models with a "
                                     "single output.")
                if class_weight is not None:
                    if sample_weight is not None:
                        raise ValueError("You cannot `class_weight` and `sample_weight` at the "
                                         "same time.")
                    sample_weight = _class_weights(y, class_weight)
                if sample_weight is not None:
                    sample_weight = _sample_weights(sample_weight, _n_samples(x), "fit")
                if validation_split and validation_data is None:
                    if not 0 < validation_split < 1:
                        raise ValueError(f"validation_split must be in (0, 1); got "
                                         f"{validation_split}")
                    # Keras: the last fraction of the samples, before shuffling
                    cut = int(_n_samples(x) * (1 - validation_split))
                    validation_data = (_rows(x, cut, None), _rows(y, cut, None))
                    if sample_weight is not None:  # the weights split with the samples
                        validation_data += (sample_weight[cut:],)
                        sample_weight = sample_weight[:cut]
                    x, y = _rows(x, 0, cut), _rows(y, 0, cut)
                train = self._arrays_dataset(x, y, batch_size, shuffle, seed, "fit",
                                             sample_weight)
                owned.append(train)
            val = None
            if validation_data is not None:
                if isinstance(validation_data, Dataset):
                    val = validation_data._materialize()
                else:
                    if len(validation_data) not in (2, 3):
                        raise ValueError("validation_data must be a dataset or a tuple (x, y) "
                                         "or (x, y, sample_weight)")
                    vx, vy = validation_data[:2]
                    vsw = validation_data[2] if len(validation_data) == 3 else None
                    val = self._arrays_dataset(self._input_of(vx), vy,
                                               validation_batch_size or batch_size, False, 0,
                                               "validation_data", vsw)
                owned.append(val)
            return self._fit_c(train, val, epochs, verbose, callbacks or [], initial_epoch,
                               steps_per_epoch, validation_steps)
        finally:
            for d in owned:
                d.close()

    def _fit_c(self, train, val, epochs, verbose, callbacks, initial_epoch, steps_per_epoch,
               validation_steps):
        if len(_models) > 1:
            gc.collect()  # frees the C side of models only a reference cycle still holds
        ctx = _FitContext(self)
        ctx.params = {"verbose": verbose, "epochs": epochs, "steps": steps_per_epoch}
        o = lib.sn_fit_defaults()
        o.epochs, o.initial_epoch = int(epochs), int(initial_epoch)
        o.steps_per_epoch = int(steps_per_epoch or 0)
        o.validation = val.h if val is not None else None
        o.validation_steps = int(validation_steps or 0)
        cbs, to_free, backup = [], [], None
        stream = None
        old_handler = None
        try:
            sched = self._compile[2] if self._compile else None
            if sched is not None:
                p = _lib.check_ptr(lib.sn_callback_lr_schedule(sched._struct()),
                                   "learning-rate schedule")
                cbs.append(p)
                to_free.append(p)
            for cb in callbacks:
                if isinstance(cb, _callbacks.BackupAndRestore):
                    backup = cb
                    o.backup = C.pointer(cb._backup(ctx))
                    continue
                ptr, own = cb._make(ctx)
                if ptr:
                    cbs.append(ptr)
                    if own:
                        to_free.append(ptr)
            if verbose == "auto":
                verbose = 1
            if verbose:
                stream = _lib.CStream()
                p = _lib.check_ptr(lib.sn_callback_progress_bar(stream.f, int(verbose)),
                                   "progress bar")
                cbs.append(p)
                to_free.append(p)
            cbs.append(ctx.collector())
            arr = (C.c_void_p * len(cbs))(*cbs)
            o.n_callbacks, o.callbacks = len(cbs), C.cast(arr, C.POINTER(C.c_void_p))
            # Ctrl-C: the handler only raises a flag; the collector stops fit at the next
            # execution's end, and fit raises KeyboardInterrupt with the model intact.
            if threading.current_thread() is threading.main_thread():
                def on_sigint(signum, frame):
                    ctx.interrupted = True
                old_handler = signal.signal(signal.SIGINT, on_sigint)
            self.stop_training = False
            self._after_fit = []  # what callbacks leave for after the C loop
            self._sync()
            self._touch()  # newer than any model sharing its layers, while fit runs
            st = lib.sn_model_fit(self._h, train.h, C.byref(o), None)
            err = _lib.error(st, "fit") if st != _lib.SN_OK else None
        finally:
            self._touch()
            if old_handler is not None:
                signal.signal(signal.SIGINT, old_handler)
            for p in to_free:
                lib.sn_callback_free(p)
            if stream is not None:
                stream.close()
        if ctx.interrupted:
            raise KeyboardInterrupt
        if ctx.exc is not None:
            raise ctx.exc
        if err is not None:
            raise err
        for f in self._after_fit:  # EarlyStopping(restore_best_weights=True)
            f()
        self._after_fit = []
        if backup is not None:
            backup._done()
        h = _callbacks.History()
        h.set_model(self)
        h.set_params(ctx.params)
        h.epoch = ctx.epochs
        h.history = ctx.history()
        self.history = h
        return h

    # -- evaluate / predict -------------------------------------------------------------------
    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False):
        from ..data import Dataset
        if self._compile is None and self._pending_compile is None:
            raise RuntimeError("You must call `compile()` before using the model "
                               "(with a loss to evaluate it).")
        x = self._input_of(x)
        self._ensure_built_for(x)
        batch_size = batch_size or 32
        if isinstance(x, Dataset):
            ds = x._materialize()
        else:
            if y is None:
                raise ValueError("evaluate: y is required with array inputs")
            ds = self._arrays_dataset(x, y, batch_size, False, 0, "evaluate", sample_weight)
        try:
            vals = (C.c_double * (_lib.SN_MAX_METRICS + 1))()
            n = C.c_int()
            t0 = time.perf_counter()
            self._sync()
            # Python callbacks with on_test_* hooks: the C pass calls them (Keras's
            # evaluate(callbacks=)); the others have nothing to do in evaluate
            ctx = _FitContext(self)
            cbs = []
            for c in callbacks or []:
                if isinstance(c, _callbacks.Callback) and _callbacks._wants_test_hooks(c):
                    c.set_model(self)
                    cbs.append(_callbacks._py_callback(c, ctx)[0])
            arr = (C.c_void_p * max(len(cbs), 1))(*cbs)
            st = lib.sn_model_evaluate_cb(self._h, ds.h, int(steps or 0), len(cbs), arr, vals,
                                          len(vals), C.byref(n))
            if ctx.exc is not None:
                raise ctx.exc
            check(st, "evaluate")
            secs = time.perf_counter() - t0
            nsteps = steps or (lib.sn_dataset_cardinality(ds.h) if isinstance(x, Dataset)
                               else math.ceil(_n_samples(x) / batch_size))
        finally:
            ds.close()
        names = self.metrics_names
        logs = {k: float(vals[i]) for i, k in enumerate(names[:n.value])}
        if verbose:
            _print_line(nsteps, secs, logs, verbose)
        if return_dict:
            return {k: logs[k] for k in sorted(logs)}
        values = [logs[k] for k in names[:n.value]]
        return values[0] if len(values) == 1 else values

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        from ..data import Dataset
        x = self._input_of(x)
        self._ensure_built_for(x)
        # Python callbacks see on_predict_begin, on_predict_batch_begin/end (with
        # {"outputs": the batch's predictions}) and on_predict_end, as in Keras
        hooks = [c for c in callbacks or [] if isinstance(c, _callbacks.Callback)]
        for c in hooks:
            c.set_model(self)
            c.on_predict_begin({})
        t0 = time.perf_counter()
        if isinstance(x, list) or self._n_outputs() > 1 or (
                isinstance(x, Dataset) and len(self._input_names()) > 1):
            out = self._predict_n(x, batch_size or 32, hooks, steps)
            nsteps = self._last_predict_steps
        elif isinstance(x, Dataset):
            parts = []
            for b in x.take(steps or -1):
                parts.append(self._predict_array(b[0] if isinstance(b, tuple) else b, None,
                                                 hooks, len(parts)))
            out = np.concatenate(parts) if parts else np.zeros(
                (0,) + self.output_shape[1:], np.float32)
            nsteps = len(parts)
        else:
            batch_size = batch_size or 32
            out = self._predict_array(x, batch_size, hooks)
            nsteps = math.ceil(len(x) / batch_size)
        for c in hooks:
            c.on_predict_end({})
        if verbose:
            _print_line(nsteps, time.perf_counter() - t0, {}, verbose)
        return out

    def _predict_array(self, x, batch_size, hooks=(), first_batch=0):
        self._sync()
        x = np.ascontiguousarray(x, dtype=np.float32)  # converted once, not per batch
        n = len(x)
        b = batch_size or max(n, 1)
        out = np.empty((n,) + lib.sn_model_output_shape(self._h).tuple(), np.float32)
        xp, op = x.ctypes.data, out.ctypes.data
        xrow, orow = x[0].nbytes if n else 0, out[0].nbytes if n else 0
        prepared = set()
        for i in range(0, n, b):
            k = min(b, n - i)
            if k not in prepared:
                check(lib.sn_model_predict_prepare(self._h, k), "predict")
                prepared.add(k)
            for c in hooks:
                c.on_predict_batch_begin(first_batch + i // b, {})
            check(lib.sn_model_predict_into(self._h, k, xp + i * xrow, op + i * orow),
                  "predict")
            for c in hooks:
                c.on_predict_batch_end(first_batch + i // b, {"outputs": out[i:i + k]})
        return out

    def _predict_n(self, x, batch_size, hooks, steps=None):
        """predict on a model of several inputs or outputs: sn_model_predict_n per batch; a list
        of float32 arrays, one per output (one array for a model of one output)."""
        from ..data import Dataset
        self._sync()
        n_out = lib.sn_model_output_count(self._h)
        if isinstance(x, Dataset):
            batches = [list(b[:len(self._input_names())]) if isinstance(b, tuple) else [b]
                       for b in x.take(steps or -1)]
        else:
            xs = [np.ascontiguousarray(a, dtype=np.float32)  # once, not per batch
                  for a in (x if isinstance(x, list) else [x])]
            n = len(xs[0])
            batches = [[a[i:i + batch_size] for a in xs] for i in range(0, n, batch_size)]
        parts = [[] for _ in range(n_out)]
        for bi, b in enumerate(batches):
            for c in hooks:
                c.on_predict_batch_begin(bi, {})
            ts = [tensor_from_array(a, _lib.SN_F32) for a in b]
            outs = (C.c_void_p * n_out)()
            try:
                arr = (C.c_void_p * len(ts))(*[t.value for t in ts])
                check(lib.sn_model_predict_n(self._h, len(ts), arr, n_out, outs), "predict")
                got = [array_from_tensor(C.c_void_p(o)) for o in outs]
            finally:
                for t in ts:
                    lib.sn_tensor_free(t)
                for o in outs:
                    if o:
                        lib.sn_tensor_free(C.c_void_p(o))
            for k in range(n_out):
                parts[k].append(got[k])
            for c in hooks:
                c.on_predict_batch_end(bi, {"outputs": got if n_out > 1 else got[0]})
        self._last_predict_steps = len(batches)
        res = [np.concatenate(p) if p else np.zeros(
            (0,) + lib.sn_model_output_shape_at(self._h, k).tuple(), np.float32)
            for k, p in enumerate(parts)]
        return res if getattr(self, "_fn_single_out", True) is False else res[0]

    def predict_on_batch(self, x):
        x = self._input_of(x)
        self._ensure_built_for(x)
        if isinstance(x, list) or self._n_outputs() > 1:
            return self._predict_n(x, max(_n_samples(x), 1), ())
        return self._predict_array(x, None)

    def _n_outputs(self):
        return lib.sn_model_output_count(self._h) if self._h is not None else 1

    def __call__(self, x, training=None):
        from .. import _function, _tensor
        if _tensor.is_tensor(x):  # a sinter tensor: traced layers or eager (issue 25)
            return _function.call_model(self, x, bool(training))
        if isinstance(x, _layers.KerasTensor) or (
                isinstance(x, (list, tuple)) and x and
                all(isinstance(t, _layers.KerasTensor) for t in x)):
            return self._call_symbolic(x, training)
        return self.predict_on_batch(x)

    def _call_symbolic(self, x, training=None):
        """model(keras_tensor): this Functional model as a layer of another Functional graph
        (Keras's nested models). The outer config holds this model's config as one layer
        entry, which the C reader inlines; the outer model shares this one's weights
        (_link, as for a model used as a Sequential's first layer)."""
        if self._fn_config is None:
            raise NotImplementedError(f"model '{self.name}': only a Functional model can be "
                                      "called on keras.Input tensors (put a Sequential's "
                                      "layers in the graph instead)")
        n_out = len(self._fn_outputs)
        first = _layers._training_kw(_layers._call(self, x), training)
        if self._fn_single_out:
            return first
        outs = [first]
        for k in range(1, n_out):  # one call, several output tensors
            t = _layers.KerasTensor.__new__(_layers.KerasTensor)
            t.__dict__.update(first.__dict__)
            t._shape, t._tensor_index = None, k
            outs.append(t)
        return outs

    def _serialize(self):
        e = dict(self._fn_config)
        e["name"] = self.name
        return e

    def reset_states(self):
        if self._h is not None:
            lib.sn_model_reset_states(self._h)

    # -- text and files -------------------------------------------------------------------------
    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False,
                show_trainable=False, layer_range=None):
        self._need_built("summary")
        self._push_trainable()  # the counts follow `trainable` as set now, as Keras's
        text = _lib.capture(lambda f: check(lib.sn_model_summary(self._h, f), "summary"))
        if print_fn is not None:
            for line in text.rstrip("\n").split("\n"):
                print_fn(line)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()

    def to_json(self, **kwargs):
        self._need_built("to_json")
        p = C.c_void_p()
        check(lib.sn_model_to_json(self._h, C.byref(p)), "to_json")
        try:
            return C.string_at(p).decode()
        finally:
            _lib.libc.free(p)

    def get_config(self):
        return json.loads(self.to_json())["config"]

    def save(self, filepath, overwrite=True, zipped=None, **kwargs):
        self._need_built("save")
        path = os.fspath(filepath)
        if not (path.endswith(".keras") or path.endswith(".json")):
            raise ValueError(f"save: the filepath must end in .keras (or .json for the "
                             f"architecture); got {path!r}")
        if not overwrite and os.path.exists(path):
            raise FileExistsError(path)
        self._sync()
        self._push_trainable()  # written as each layer's "trainable"
        check(lib.sn_model_save(self._h, path.encode()), "save")

    def save_weights(self, filepath, overwrite=True):
        self._need_built("save_weights")
        path = os.fspath(filepath)
        if not path.endswith(".weights.h5"):
            raise ValueError(f"save_weights: the filename must end in `.weights.h5`; got "
                             f"{path!r}")
        if not overwrite and os.path.exists(path):
            raise FileExistsError(path)
        self._sync()
        check(lib.sn_model_save_weights(self._h, path.encode()), "save_weights")

    def load_weights(self, filepath, skip_mismatch=False, **kwargs):
        self._need_built("load_weights")
        self._sync()  # a file may hold only some variables
        check(lib.sn_model_load_weights(self._h, os.fspath(filepath).encode()), "load_weights")
        self._touch()

    def __repr__(self):
        return f"<{type(self).__name__} name={self.name}, built={self.built}>"


def _metric_list(ms):
    """compile's metrics as a list: Keras takes none (None), one metric (a name or a Metric)
    or a list of them; a list or dict passes as it is."""
    ms = ms or []
    return [ms] if isinstance(ms, (str, _metrics.Metric)) else ms


def _per_output(v, names, what):
    """A value per name: a list/tuple in order, a dict by name (missing names -> None), or one
    value for every name (Keras's forms of loss, loss_weights, metrics, x and y)."""
    if isinstance(v, dict):
        extra = sorted(set(v) - set(names))
        if extra:
            raise ValueError(f"{what}: keys {extra} are not among the model's names {names}")
        return [v.get(nm) for nm in names]
    if isinstance(v, (list, tuple)) and not (what == "metrics" and len(names) == 1 and
                                             not any(isinstance(m, (list, tuple)) for m in v)):
        if len(v) != len(names):
            raise ValueError(f"{what}: {len(v)} entries for {len(names)} "
                             f"{'inputs' if what == 'x' else 'outputs'} {names}")
        return list(v)
    return [v] * len(names)


def _n_samples(x):
    return len(x[0]) if isinstance(x, list) else len(x)


def _rows(v, a, b):
    """Rows a:b of an array, or of each array of a list / dict."""
    if isinstance(v, dict):
        return {k: np.asarray(u)[a:b] for k, u in v.items()}
    if isinstance(v, (list, tuple)):
        return [np.asarray(u)[a:b] for u in v]
    return v[a:b]


def _sample_weights(sw, n, what):
    """Keras's sample_weight for n samples: [n] or [n, 1], any numeric dtype -> [n] f32."""
    sw = np.asarray(sw)
    if sw.ndim == 2 and sw.shape[1] == 1:
        sw = sw[:, 0]
    if sw.ndim != 1 or len(sw) != n:
        raise ValueError(f"{what}: sample_weight of shape {sw.shape}; expected one weight per "
                         f"sample, of shape ({n},)")
    if sw.dtype.kind not in "biuf":
        raise TypeError(f"{what}: sample_weight must be numeric; got dtype {sw.dtype}")
    return sw.astype(np.float32, copy=False)


def _class_weights(y, class_weight):
    """Keras's class_weight_to_sample_weights: the class of each sample (the argmax of one-hot
    labels, else the rounded label) looked up in class_weight, 1 when absent."""
    if not isinstance(class_weight, dict):
        raise TypeError(f"class_weight must be a dict {{class index: weight}}; got "
                        f"{type(class_weight).__name__}")
    y = np.asarray(y)
    if y.ndim > 1:
        y = np.argmax(y, axis=-1) if y.shape[-1] != 1 else np.squeeze(y, axis=-1)
    y = np.round(y).astype(np.int32)
    if y.ndim != 1:
        raise ValueError(f"class_weight: labels of shape {y.shape} do not give one class per "
                         "sample")
    sw = np.ones(len(y), np.float32)
    for k, v in class_weight.items():
        sw[y == int(k)] = v
    return sw


def _fmt_step(s):
    # Keras's per-step time: s, ms or us
    if s >= 1:
        return f"{s:.0f}s/step"
    if s >= 1e-3:
        return f"{s * 1e3:.0f}ms/step"
    return f"{s * 1e6:.0f}us/step"


_FULL_BAR = "\u2501" * 20  # Keras 3's bar: 20 heavy horizontals


def _print_line(steps, secs, logs, verbose=2):
    """The last line Keras 3's Progbar prints for evaluate/predict: with verbose 2 the plain
    line, otherwise the bar with its escape codes (as the C bar does for fit). The logs in
    Keras's order: by name."""
    if verbose == 2:
        line = f"{steps}/{steps} - {secs:.0f}s - {_fmt_step(secs / max(steps, 1))}"
    else:
        line = (f"\x1b[1m{steps}/{steps}\x1b[0m \x1b[32m{_FULL_BAR}\x1b[0m\x1b[37m\x1b[0m "
                f"\x1b[1m{secs:.0f}s\x1b[0m {_fmt_step(secs / max(steps, 1))}")
    for k in sorted(logs):
        v = logs[k]
        fixed = v > 1e-3 if verbose == 2 else abs(v) > 1e-3
        line += f" - {k}: {v:.4f}" if fixed else f" - {k}: {v:.4e}"
    print(line)


_CLOCK = itertools.count(1)


def _copy_layers(src, dst, names):
    """dst's layers `names` take src's weights (no syncing: the callers do)."""
    si = {lib.sn_model_layer_name(src._h, i).decode(): i
          for i in range(lib.sn_model_layer_count(src._h))}
    di = {lib.sn_model_layer_name(dst._h, i).decode(): i
          for i in range(lib.sn_model_layer_count(dst._h))}
    for n in names:
        g, nodes = dst._vars(di[n])
        dst._write(g, nodes, src._read(*src._vars(si[n])), f"layer '{n}'")


def _link(inner, outer):
    """outer (just built) holds inner's layers: it takes their weights now and they stay
    shared from here on."""
    inner._sync()
    names = [lib.sn_model_layer_name(inner._h, i).decode()
             for i in range(lib.sn_model_layer_count(inner._h))]
    _copy_layers(inner, outer, names)
    outer._wtime = inner._wtime
    # weak both ways (a model dropped is no longer synced); the outer model holds the inner
    # one alive as Keras's does
    inner._links.append((weakref.ref(outer), names))
    outer._links.append((weakref.ref(inner), names))
    outer._inner_models.append(inner)


def _functional_config(name, trainable, inputs, outputs):
    """Keras 3's Functional config for the graph of calls from `inputs` to `outputs`: every
    layer once with the arguments of each of its calls in this model (inbound_nodes, renumbered
    when a layer was also called outside it), input_layers and output_layers."""
    order, seen_layers, used = [], set(), {}

    def visit(t, path):
        key = (id(t._layer), t._call_index)
        if id(t) in path:
            raise ValueError("Model: the graph has a cycle")
        if key in used.setdefault("_tensors", set()):
            return
        for a in _layers._inputs_of(t):
            visit(a, path | {id(t)})
        used["_tensors"].add(key)
        if id(t._layer) not in seen_layers:
            seen_layers.add(id(t._layer))
            order.append(t._layer)
        used.setdefault(id(t._layer), set()).add(t._call_index)

    for t in outputs:
        visit(t, frozenset())
    input_ids = {id(t._layer) for t in inputs}
    for l in order:
        if isinstance(l, _layers.InputLayer) and id(l) not in input_ids:
            raise ValueError(f"Model: the outputs depend on input '{l.name}', which is not "
                             "among the model's inputs")
    for t in inputs:
        if id(t._layer) not in seen_layers:  # an input no output uses: Keras keeps it too
            seen_layers.add(id(t._layer))
            order.insert(0, t._layer)
            used[id(t._layer)] = {0}
    names = {}
    for l in order:
        if l.name in names and names[l.name] is not l:
            raise ValueError(f"Model: two layers are named '{l.name}'; layer names must be "
                             "unique")
        names[l.name] = l
    # a call's number in this model: its rank among the layer's calls the model uses
    renum = {id(l): {c: k for k, c in enumerate(sorted(used[id(l)]))} for l in order}

    def ref(t):
        return [t._layer.name, renum[id(t._layer)][t._call_index],
                getattr(t, "_tensor_index", 0)]

    def arg(t):
        return {"class_name": "__keras_tensor__",
                "config": {"shape": None, "dtype": t.dtype, "keras_history": ref(t)}}

    entries = []
    objs = {l.name: l for l in order}
    for l in order:
        e = dict(l._serialize())
        e["name"] = l.name
        nodes = []
        if not isinstance(l, _layers.InputLayer):
            for c in sorted(used[id(l)]):
                call = l._calls[c]
                args = [arg(a) for a in call._args]
                kwargs = dict(getattr(call, "_kwargs", {}))
                kwargs.update({k: arg(t) for k, t in getattr(call, "_kwtensors", {}).items()})
                order = getattr(call, "_kworder", None)  # Keras writes the call's own order
                if order:
                    kwargs = {**{k: kwargs[k] for k in order if k in kwargs}, **kwargs}
                nodes.append({"args": [args] if call._packed else args, "kwargs": kwargs})
        e["inbound_nodes"] = nodes
        entries.append(e)
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": name, "trainable": trainable, "layers": entries,
                       "input_layers": [ref(t) for t in inputs],
                       "output_layers": [ref(t) for t in outputs]},
            "registered_name": "Functional", "build_config": {"input_shape": None}}, objs


def _tensor_shape(t):
    """A KerasTensor's shape: the graph up to it built once in C (not as a Python model, so
    no automatic name is used up and no layer is bound to it)."""
    inputs, seen = [], set()

    def find(u):
        if id(u) in seen:
            return
        seen.add(id(u))
        if not u._args:
            inputs.append(u)
        for a in _layers._inputs_of(u):
            find(a)

    find(t)
    cfg, _ = _functional_config("shape_probe", True, inputs, [t])
    text = json.dumps(cfg).encode()
    h = C.c_void_p()
    info = _lib.ModelFileInfo()
    check(lib.sn_model_from_json(text, len(text), 0, C.byref(h), C.byref(info)),
          f"tensor {t.name}")
    try:
        # the batch dimension is the inputs' (None unless Input(batch_size=) fixed it)
        return (inputs[0]._shape[0],) + lib.sn_model_output_shape(h).tuple()
    finally:
        lib.sn_model_free(h)


def _functional_layers(h, objs):
    """The Python layers of a built Functional model in Keras's model.layers order (the C
    model's, which its JSON lists, InputLayers included)."""
    p = C.c_void_p()
    check(lib.sn_model_to_json(h, C.byref(p)), "model")
    try:
        entries = json.loads(C.string_at(p).decode())["config"]["layers"]
    finally:
        _lib.libc.free(p)
    return [objs[e["config"]["name"]] for e in entries]


class Sequential(Model):
    def __init__(self, layers=None, trainable=True, name=None):
        self._init(name or _naming.unique("sequential"))
        self.trainable = trainable
        for l in layers or []:
            self.add(l)

    def add(self, layer):
        if isinstance(layer, _layers.KerasTensor):
            if self._layers or self._input is not None:
                raise ValueError("Sequential: keras.Input must come first")
            self._input = layer._layer
            return
        if isinstance(layer, _layers.InputLayer):
            self._input = layer
            return
        if isinstance(layer, Model):
            # A model as a layer: its layers join this one (sinter's C models do not nest)
            # and their weights stay shared with it (Model._sync).
            if self._layers or self._input is not None:
                raise NotImplementedError("Sequential: a model can only be the first layer")
            layer._try_build()
            if layer._h is None:
                raise ValueError(f"Sequential: model '{layer.name}' must be built first")
            layer._one_in_one_out(f"Sequential: model '{layer.name}' as a layer")
            if layer._fn_config is not None:
                # a Functional model: this one becomes the same graph with the layers added
                # after it called on its output
                self._nested_fn = layer
            else:
                self._input = _layers.InputLayer(
                    shape=lib.sn_model_input_shape(layer._h).tuple(),
                    name=_naming.unique("input_layer"))
                entries = json.loads(layer.to_json())["config"]["layers"]
                self._layers += [_layers.RawLayer(e) for e in entries
                                 if e["class_name"] != "InputLayer"]
            self._pending_links.append(layer)
            return
        if not isinstance(layer, _layers.Layer):
            raise TypeError(f"Sequential.add: expected a keras layer, got {layer!r}")
        if self._h is not None:
            raise NotImplementedError("Sequential.add after the model is built: sinter builds "
                                      "the C model once; add every layer first")
        if not self._layers and self._input is None and layer._input_shape is not None and \
                getattr(self, "_nested_fn", None) is None:
            self._input = _layers.InputLayer(shape=layer._input_shape,
                                             batch_size=layer._batch_size,
                                             name=_naming.unique("input_layer"))
        self._layers.append(layer)  # built lazily: more layers may follow

    def pop(self):
        if self._h is not None:
            raise NotImplementedError("Sequential.pop after build")
        return self._layers.pop()

    def _try_build(self):
        # built once every layer is known: at the first use that needs the C model
        inner = getattr(self, "_nested_fn", None)
        if self._h is None and inner is not None:
            t = inner._fn_outputs[0]
            for l in self._layers:
                t = l(t)
            self._fn_single_in = self._fn_single_out = True
            self._fn_inputs, self._fn_outputs = inner._fn_inputs, [t]
            self._fn_config, self._fn_objs = _functional_config(
                self.name, self.trainable, inner._fn_inputs, [t])
            self._build(None)
        elif self._h is None and self._input is not None and self._input.shape is not None:
            self._build(self._input.shape)

    def get_weights(self):
        self._try_build()
        return super().get_weights()



class _FitContext:
    """What one fit's Python callbacks share: the model, Python objects C points to (kept
    alive until fit returns), the first exception raised in a callback, the Ctrl-C flag and
    the epoch logs that become History."""

    def __init__(self, model):
        self.model = model
        self.keep = []
        self.exc = None
        self.interrupted = False
        self.epochs = []
        self.rows = []
        self.last_logs = {}
        self.params = {}

    def collector(self):
        def batch_end(_user, logs, stop):
            if self.interrupted:
                return _lib.SN_ERR_STATE  # stop now, not after validation
            return 0

        def epoch_end(_user, logs, stop):
            d = logs.contents.dict()
            self.epochs.append(int(logs.contents.epoch))
            self.rows.append(d)
            self.last_logs = d
            if self.interrupted:
                return _lib.SN_ERR_STATE
            return 0

        s = _lib.Callback()
        s.on_batch_end = _lib.ON_BATCH_END(batch_end)
        s.on_epoch_end = _lib.ON_EPOCH_END(epoch_end)
        self.keep.append(s)
        return C.addressof(s)

    def history(self):
        # Keras 3's order: the training logs by name, then the validation logs by name.
        keys = []
        for r in self.rows:
            keys += [k for k in r if k not in keys]
        keys = sorted(k for k in keys if not k.startswith("val_")) + \
            sorted(k for k in keys if k.startswith("val_"))
        return {k: [r.get(k, float("nan")) for r in self.rows] for k in keys}


# ---- loading -------------------------------------------------------------------------------

class _LoadedLayer(_layers.Layer):
    """A layer of a model read from a file: its name and Keras class (the C model has the
    rest)."""

    def __init__(self, name, cls):
        self.name, self._cls, self.trainable = name, cls, True
        self._input_shape = self._batch_size = None
        self._model = None
        self._dtype = None

    def __repr__(self):
        return f"<{self._cls} name={self.name}>"


def _wrap_c_model(h, info, compile=True):
    m = Sequential.__new__(Sequential)
    m._init(None)
    m._strategy = None
    m._adopt(h)
    cfg = json.loads(m.to_json())["config"]
    m.name = cfg["name"]
    m.trainable = cfg.get("trainable", True)
    m._c_frozen = not m.trainable
    for i in range(lib.sn_model_layer_count(h)):
        l = _LoadedLayer(lib.sn_model_layer_name(h, i).decode(),
                         lib.sn_model_layer_class(h, i).decode())
        l.trainable = bool(lib.sn_model_layer_trainable(h, i))  # the file's flag
        l._model = (m, i)
        m._layers.append(l)
    if compile and info.has_compile:
        o = info.compile
        o.predict_raw = True
        names = ["accuracy" if o.metrics[i] == _metrics.ACCURACY
                 else "sparse_categorical_accuracy" for i in range(o.n_metrics)]
        m._apply_compile(o, names, None)
    return m


def load_model(filepath, custom_objects=None, compile=True, safe_mode=True):
    """keras.models.load_model: a Keras 3 .keras archive or a model JSON file."""
    if custom_objects:
        raise NotImplementedError("load_model: custom objects are not supported by sinter")
    h = C.c_void_p()
    info = _lib.ModelFileInfo()
    check(lib.sn_model_load(os.fspath(filepath).encode(), _random.next_seed(), C.byref(h),
                            C.byref(info)), "load_model")
    return _wrap_c_model(h, info, compile)


def model_from_json(json_string, custom_objects=None):
    text = json_string.encode() if isinstance(json_string, str) else json_string
    h = C.c_void_p()
    info = _lib.ModelFileInfo()
    check(lib.sn_model_from_json(text, len(text), _random.next_seed(), C.byref(h),
                                 C.byref(info)), "model_from_json")
    return _wrap_c_model(h, info, compile=False)


def clone_model(model):
    return model_from_json(model.to_json())
