#!/usr/bin/env python3
"""The comparison server of bench/serve_bench.sh: small_cnn in Keras (TensorFlow backend),
answered with model.predict behind Python's http.server, speaking the same
{"instances": [...]} -> {"predictions": [...]} as TF Serving and `sinter serve`.

    tf_serve.py PORT [THREADS]

It prints "listening PORT" when ready. The model ends in softmax, so predict gives the
probabilities sinter's predict gives (sinter applies softmax to the logits of its compiled
model). One lock around predict: Keras does not promise that concurrent predict calls on
one model are safe, and a minimal server is what this measures."""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port = int(sys.argv[1])
threads = int(sys.argv[2]) if len(sys.argv) > 2 else 2
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
import keras  # noqa: E402

model = keras.Sequential([
    keras.Input((28, 28, 1)),
    keras.layers.Conv2D(32, 3, activation="relu"),
    keras.layers.MaxPooling2D(2),
    keras.layers.Conv2D(64, 3, activation="relu"),
    keras.layers.MaxPooling2D(2),
    keras.layers.Flatten(),
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(10, activation="softmax"),
])
model.predict(np.zeros((1, 28, 28, 1), np.float32), verbose=0)  # build and trace once
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        try:
            x = np.asarray(json.loads(self.rfile.read(n))["instances"], dtype=np.float32)
        except Exception as e:
            return self.reply(400, {"error": str(e)})
        with lock:
            p = model.predict(x, verbose=0)
        self.reply(200, {"predictions": p.tolist()})


srv = ThreadingHTTPServer(("127.0.0.1", port), Handler)
srv.daemon_threads = True
print("listening", srv.server_address[1], flush=True)
srv.serve_forever()
