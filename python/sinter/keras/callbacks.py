"""keras.callbacks over sinter's C callbacks (nn.h).

The built-in callbacks are the C ones, made for one fit and freed after it. A callback
written in Python (a subclass of Callback, LambdaCallback, a LearningRateScheduler's
function) runs through a C sn_callback whose function pointers are ctypes callbacks: fit calls
it between executions, with the GIL taken only for that call. An exception raised in one
stops training (the C callback returns a failing status) and is raised again by fit.
"""
import ctypes as C
import glob
import math
import os

from .. import _lib

SN_ERR_STATE = _lib.SN_ERR_STATE


class Callback:
    """keras.callbacks.Callback: override the on_* methods you need."""

    def __init__(self):
        self.model = None
        self.params = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params):
        self.params = params

    def on_train_begin(self, logs=None):
        pass

    def on_train_end(self, logs=None):
        pass

    def on_epoch_begin(self, epoch, logs=None):
        pass

    def on_epoch_end(self, epoch, logs=None):
        pass

    def on_train_batch_begin(self, batch, logs=None):
        pass

    def on_train_batch_end(self, batch, logs=None):
        pass

    def on_batch_begin(self, batch, logs=None):
        pass

    def on_batch_end(self, batch, logs=None):
        pass

    # evaluate and fit's validation run inside one C call: these are not called (overriding
    # them is refused at fit/evaluate); predict runs its batches from Python and calls them.
    def on_test_begin(self, logs=None):
        pass

    def on_test_end(self, logs=None):
        pass

    def on_test_batch_begin(self, batch, logs=None):
        pass

    def on_test_batch_end(self, batch, logs=None):
        pass

    def on_predict_begin(self, logs=None):
        pass

    def on_predict_end(self, logs=None):
        pass

    def on_predict_batch_begin(self, batch, logs=None):
        pass

    def on_predict_batch_end(self, batch, logs=None):
        pass

    # The C side of a Python callback: a struct of ctypes function pointers.
    def _make(self, ctx):
        return _py_callback(self, ctx)


def _overrides(cb, name):
    return getattr(type(cb), name, None) is not getattr(Callback, name)


def _wants_test_hooks(cb):
    return getattr(cb, "_want_test", False) or any(
        _overrides(cb, n) for n in ("on_test_begin", "on_test_end", "on_test_batch_begin",
                                    "on_test_batch_end"))


def _py_callback(cb, ctx):
    """An sn_callback struct that calls cb's methods; kept alive in ctx until fit (or
    evaluate) returns."""

    def guard(fn):
        # Exceptions must not cross C: store the first, stop training, fit raises it.
        def wrapped(*args):
            if ctx.exc is not None:
                return SN_ERR_STATE
            try:
                return fn(*args) or 0
            except BaseException as e:  # KeyboardInterrupt too: fit re-raises it
                ctx.exc = e
                return SN_ERR_STATE
        return wrapped

    def train_begin(_user, _model):
        cb.set_model(ctx.model)
        cb.set_params(ctx.params)
        cb.on_train_begin({})

    def epoch_begin(_user, epoch, _epochs):
        cb.on_epoch_begin(epoch, {})

    def batch_begin(_user, _epoch, step):
        cb.on_train_batch_begin(int(step), {})
        cb.on_batch_begin(int(step), {})

    def batch_end(_user, logs, stop):
        d = logs.contents.dict()
        b = int(logs.contents.step) - 1
        cb.on_train_batch_end(b, d)
        cb.on_batch_end(b, d)
        if ctx.model is not None and ctx.model.stop_training:
            stop[0] = True

    def epoch_end(_user, logs, stop):
        cb.on_epoch_end(int(logs.contents.epoch), logs.contents.dict())
        if ctx.model is not None and ctx.model.stop_training:
            stop[0] = True

    # Keras's on_test_*: around fit's validation and evaluate(callbacks=) (the C evaluation
    # pass calls them; logs are the evaluation's running means, without "val_")
    def test_begin(_user):
        cb.on_test_begin({})

    def test_batch_begin(_user, step):
        cb.on_test_batch_begin(int(step), {})

    def test_batch_end(_user, logs):
        cb.on_test_batch_end(int(logs.contents.step) - 1, logs.contents.dict())

    def test_end(_user, logs):
        cb.on_test_end(logs.contents.dict())

    def train_end(_user):
        if ctx.exc is None:
            try:
                cb.on_train_end(ctx.last_logs)
            except BaseException as e:
                ctx.exc = e

    s = _lib.Callback()
    s.on_train_begin = _lib.ON_TRAIN_BEGIN(guard(train_begin))
    s.on_epoch_begin = _lib.ON_EPOCH_BEGIN(guard(epoch_begin))
    if (getattr(cb, "_want_batch", False) or _overrides(cb, "on_train_batch_end")
            or _overrides(cb, "on_batch_end")):
        # only then: a Python call per execution costs a few microseconds
        s.on_batch_end = _lib.ON_BATCH_END(guard(batch_end))
    if (getattr(cb, "_want_batch_begin", False) or _overrides(cb, "on_train_batch_begin")
            or _overrides(cb, "on_batch_begin")):
        s.on_batch_begin = _lib.ON_BATCH_BEGIN(guard(batch_begin))
    s.on_epoch_end = _lib.ON_EPOCH_END(guard(epoch_end))
    s.on_train_end = _lib.ON_TRAIN_END(train_end)
    if _wants_test_hooks(cb):
        s.on_test_begin = _lib.ON_TEST_BEGIN(guard(test_begin))
        s.on_test_batch_begin = _lib.ON_TEST_BATCH_BEGIN(guard(test_batch_begin))
        s.on_test_batch_end = _lib.ON_TEST_BATCH_END(guard(test_batch_end))
        s.on_test_end = _lib.ON_TEST_END(guard(test_end))
    ctx.keep.append(s)
    return C.addressof(s), False


class LambdaCallback(Callback):
    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_train_batch_begin=None, on_train_batch_end=None,
                 on_batch_begin=None, on_batch_end=None, on_test_begin=None,
                 on_test_end=None, on_test_batch_begin=None, on_test_batch_end=None, **kwargs):
        super().__init__()
        # instance attributes shadow the no-op methods (called without self, as in Keras)
        for name, f in (("on_epoch_begin", on_epoch_begin), ("on_epoch_end", on_epoch_end),
                        ("on_train_begin", on_train_begin), ("on_train_end", on_train_end),
                        ("on_train_batch_begin", on_train_batch_begin),
                        ("on_batch_begin", on_batch_begin),
                        ("on_train_batch_end", on_train_batch_end),
                        ("on_batch_end", on_batch_end), ("on_test_begin", on_test_begin),
                        ("on_test_end", on_test_end),
                        ("on_test_batch_begin", on_test_batch_begin),
                        ("on_test_batch_end", on_test_batch_end)):
            if f is not None:
                setattr(self, name, f)
        for k in kwargs:
            if k.startswith("on_predict"):
                setattr(self, k, kwargs[k])
            else:
                raise TypeError(f"LambdaCallback: unexpected argument {k!r}")
        self._want_batch = (on_train_batch_end or on_batch_end) is not None
        self._want_batch_begin = (on_train_batch_begin or on_batch_begin) is not None
        self._want_test = any(f is not None for f in (on_test_begin, on_test_end,
                                                       on_test_batch_begin, on_test_batch_end))


def _c(ptr, what):
    return _lib.check_ptr(ptr, what), True


def _mode(mode, what):
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"{what}: mode must be 'auto', 'min' or 'max'; got {mode!r}")
    return mode.encode()


class EarlyStopping(Callback):
    """Keras's EarlyStopping. With its defaults (mode "auto", no baseline,
    restore_best_weights False, start_from_epoch 0) it is the C callback; otherwise it runs in
    Python as Keras 3's own code does, once per epoch (restore_best_weights keeps a copy of
    the weights of the best epoch and sets them back when fit ends, as Keras's on_train_end
    does; here right after the C loop returns)."""

    def __init__(self, monitor="val_loss", min_delta=0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        _mode(mode, "EarlyStopping")
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        self.verbose, self.mode, self.baseline = verbose, mode, baseline
        self.restore_best_weights, self.start_from_epoch = restore_best_weights, start_from_epoch
        self._in_python = (mode != "auto" or baseline is not None or restore_best_weights
                           or start_from_epoch)

    def _make(self, ctx):
        if self._in_python:
            return _py_callback(self, ctx)
        return _c(_lib.lib.sn_callback_early_stopping(self.monitor.encode(),
                                                      float(self.min_delta),
                                                      int(self.patience)), "EarlyStopping")

    def _greater(self):
        if self.mode != "auto":
            return self.mode == "max"
        # Keras 3's "auto": accuracies and AUC are maximised, anything else minimised
        m = self.monitor[4:] if self.monitor.startswith("val_") else self.monitor
        return m.endswith("acc") or m.endswith("accuracy") or m.endswith("auc")

    def _is_improvement(self, value, reference):
        if reference is None:
            return True
        if self._greater():
            return value - self.min_delta > reference
        return value + self.min_delta < reference

    def on_train_begin(self, logs=None):
        self.wait = 0
        self.stopped_epoch = 0
        self.best = None
        self.best_weights = None
        self.best_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        current = (logs or {}).get(self.monitor)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = self.model.get_weights()
            self.best_epoch = epoch
        self.wait += 1
        if self._is_improvement(current, self.best):
            self.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = self.model.get_weights()
            if self.baseline is None or self._is_improvement(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print("Restoring model weights from the end of the best epoch: "
                      f"{self.best_epoch + 1}.")
            best = self.best_weights
            self.model._after_fit.append(lambda: self.model.set_weights(best))


class TerminateOnNaN(Callback):
    def _make(self, ctx):
        return _c(_lib.lib.sn_callback_terminate_on_nan(), "TerminateOnNaN")


class CSVLogger(Callback):
    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        if separator != "," or append:
            raise NotImplementedError("CSVLogger: sinter writes separator ',' with "
                                      "append=False")
        self.filename = os.fspath(filename)

    def _make(self, ctx):
        return _c(_lib.lib.sn_callback_csv_logger(self.filename.encode()), "CSVLogger")


class ModelCheckpoint(Callback):
    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__()
        if save_freq != "epoch" or initial_value_threshold is not None:
            raise NotImplementedError("ModelCheckpoint: sinter saves at each epoch's end "
                                      "(save_freq='epoch', no initial_value_threshold)")
        self.filepath, self.monitor = os.fspath(filepath), monitor
        self.save_best_only, self.save_weights_only, self.mode = \
            save_best_only, save_weights_only, mode

    def _make(self, ctx):
        ctx.keep += [self.filepath.encode(), self.monitor.encode()]
        o = _lib.lib.sn_model_checkpoint_defaults(ctx.keep[-2])
        o.monitor, o.mode = ctx.keep[-1], _mode(self.mode, "ModelCheckpoint")
        o.save_best_only, o.save_weights_only = self.save_best_only, self.save_weights_only
        return _c(_lib.lib.sn_callback_model_checkpoint(o), "ModelCheckpoint")


class ReduceLROnPlateau(Callback):
    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0, **kwargs):
        super().__init__()
        if kwargs:
            raise TypeError(f"ReduceLROnPlateau: unexpected arguments {sorted(kwargs)}")
        self.monitor, self.factor, self.patience, self.mode = monitor, factor, patience, mode
        self.min_delta, self.cooldown, self.min_lr = min_delta, cooldown, min_lr

    def _make(self, ctx):
        o = _lib.lib.sn_reduce_lr_defaults()
        ctx.keep.append(self.monitor.encode())
        o.monitor, o.mode = ctx.keep[-1], _mode(self.mode, "ReduceLROnPlateau")
        o.factor, o.patience, o.min_delta = self.factor, self.patience, self.min_delta
        o.cooldown, o.min_lr = self.cooldown, self.min_lr
        return _c(_lib.lib.sn_callback_reduce_lr_on_plateau(o), "ReduceLROnPlateau")


class LearningRateScheduler(Callback):
    def __init__(self, schedule, verbose=0):
        super().__init__()
        self.schedule = schedule

    def _make(self, ctx):
        def fn(_user, epoch, lr):
            if ctx.exc is not None:
                return math.nan
            try:
                try:  # Keras: schedule(epoch, lr), or schedule(epoch) for one-argument ones
                    v = self.schedule(epoch, lr)
                except TypeError:
                    v = self.schedule(epoch)
                return float(v)
            except BaseException as e:
                ctx.exc = e
                return math.nan  # C refuses a non-finite rate and stops
        f = _lib.LR_SCHEDULE_FN(fn)
        ctx.keep.append(f)
        return _c(_lib.lib.sn_callback_lr_scheduler(f, None), "LearningRateScheduler")


class TensorBoard(Callback):
    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True, write_images=False,
                 write_steps_per_second=False, update_freq="epoch", profile_batch=0,
                 embeddings_freq=0, embeddings_metadata=None):
        super().__init__()
        if write_images or write_steps_per_second or profile_batch or embeddings_freq:
            raise NotImplementedError("TensorBoard: sinter writes scalars and histograms "
                                      "(no images, steps per second, profiles or embeddings)")
        if update_freq == "batch":
            update_freq = 1
        if update_freq != "epoch" and not isinstance(update_freq, int):
            raise ValueError(f"TensorBoard: update_freq must be 'epoch', 'batch' or an int; "
                             f"got {update_freq!r}")
        self.log_dir, self.histogram_freq = os.fspath(log_dir), histogram_freq
        self.update_freq = 0 if update_freq == "epoch" else update_freq

    def _make(self, ctx):
        o = _lib.lib.sn_tensorboard_defaults()
        ctx.keep.append(self.log_dir.encode())
        o.log_dir, o.update_freq, o.histogram_freq = ctx.keep[-1], self.update_freq, \
            self.histogram_freq
        return _c(_lib.lib.sn_callback_tensorboard(o), "TensorBoard")


class BackupAndRestore(Callback):
    """Built into sinter's fit (sn_backup_opts): the whole training state in backup_dir,
    resumed from at the next fit; deleted after a fit that completes when delete_checkpoint."""

    def __init__(self, backup_dir, save_freq="epoch", double_checkpoint=False,
                 delete_checkpoint=True):
        super().__init__()
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise ValueError(f"BackupAndRestore: save_freq must be 'epoch' or an int > 0; got "
                             f"{save_freq!r}")
        self.backup_dir = os.fspath(backup_dir)
        self.save_freq, self.delete_checkpoint = save_freq, delete_checkpoint

    def _backup(self, ctx):
        o = _lib.lib.sn_backup_defaults()
        ctx.keep.append(self.backup_dir.encode())
        o.dir = ctx.keep[-1]
        o.every_steps = 0 if self.save_freq == "epoch" else self.save_freq
        ctx.keep.append(o)
        return o

    def _done(self):
        if self.delete_checkpoint:
            for f in glob.glob(os.path.join(self.backup_dir, "ckpt-*.h5")):
                os.remove(f)

    def _make(self, ctx):
        return None, False


class History(Callback):
    """What fit returns: .history maps each log name to its per-epoch values."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def __repr__(self):
        return f"<History epochs={len(self.epoch)} keys={list(self.history)}>"


class ProgbarLogger(Callback):
    """Accepted for compatibility: fit always draws its C progress bar when verbose."""

    def _make(self, ctx):
        return None, False
