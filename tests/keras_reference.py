"""Imported first by the interop scripts (keras_models_interop.py, keras_losses_interop.py),
before keras: real Keras on TensorFlow's CPU, quiet, and a summary as wide as sinter's."""
import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ["COLUMNS"] = "80"  # Keras's summary is as wide as the terminal; sinter prints 80
