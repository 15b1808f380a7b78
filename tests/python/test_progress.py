"""The progress lines of fit, evaluate and predict (sinter's C progress bar and the package's
own evaluate/predict line) against real Keras 3's (progress_lines.py): the same text at the end
of each epoch, byte for byte once the times and the digits of the values are masked (the
models start from different random weights): Keras 3's bar with its escape codes for
verbose=1, its plain line for verbose=2, the logs in its order (training logs by name, val_
logs by name, then learning_rate)."""
import os
import re

from conftest import HERE, keras_python, run_keras, run_py

SCRIPT = os.path.join(HERE, "progress_lines.py")


def final_lines(out):
    """The lines that end a progress bar, as a terminal would leave them: the text after the
    last carriage return, without backspaces and trailing blanks (Keras pads a redraw to the
    previous one's width), times and value digits masked. Keras's redraws before the last
    one and empty lines are left out: outside a terminal sinter prints only the last. (Keras's
    redraws come out on lines of their own here, and how many there are depends on timing:
    it redraws at most every 0.05 s, so the full bar before validation may be one.)"""
    lines = []
    for raw in out.split("\n"):
        t = raw.split("\r")[-1].replace("\b", "").rstrip(" ")
        if not t:
            continue
        t = re.sub(r"\x1b\[1m\d+s\x1b\[0m", "\x1b[1mTs\x1b[0m", t)
        t = re.sub(r" - \d+s - ", " - Ts - ", t)
        t = re.sub(r"\d+(ms|us|s)/step", "T/step", t)
        t = re.sub(r"-?\d+\.\d{4}e[+-]\d+", "D.DDDDe+DD", t)
        t = re.sub(r"-?\d+\.\d{4}", "D.DDDD", t)
        bar = t.startswith("\x1b[1m")
        if bar and lines and lines[-1].startswith("\x1b[1m"):
            lines[-1] = t  # a later redraw of the same bar
        else:
            lines.append(t)
    return lines


def test_epoch_end_lines_as_keras():
    mine = run_py(SCRIPT, "sinter")
    assert mine.returncode == 0, f"sinter run failed:\n{mine.stderr[-3000:]}"
    ref = run_keras(keras_python(), SCRIPT, "keras")
    assert ref.returncode == 0, f"Keras run failed:\n{ref.stderr[-3000:]}"
    a, b = final_lines(mine.stdout), final_lines(ref.stdout)
    assert a == b, "progress lines differ:\n" + "\n".join(
        f"sinter: {x!r}\nKeras:  {y!r}" for x, y in zip(a, b) if x != y)
