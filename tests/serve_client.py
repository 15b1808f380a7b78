#!/usr/bin/env python3
"""Checks `sinter serve` the way TensorFlow Serving's clients use it: the standard library
only (urllib, http.client, socket), against 127.0.0.1. Run by tests/test_serve.sh:

    serve_client.py api    PORT          every endpoint and error code, hostile bodies
    serve_client.py batch  PORT REFPORT  concurrent single requests == the same rows alone
    serve_client.py load   PORT PID SECONDS CONNECTIONS
                                         valid + malformed + oversize + slow requests
    serve_client.py drain  PORT PID      requests queued in the batcher, then SIGTERM
    serve_client.py stall  PORT          a client stalled mid-body is disconnected
    serve_client.py weights PORT CSV IDX_GZ   served == `sinter predict` on trained weights

Every check prints what differed and the script exits 1 when any failed. No check measures
time: the deadlines below only bound how long a broken server can hang the test."""
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

FAILS = []
PASSES = [0]


def check(cond, what):
    if cond:
        PASSES[0] += 1
    else:
        FAILS.append(what)
        print("FAIL:", what, file=sys.stderr)


def finish(name):
    print(f"{name}: {PASSES[0]} passed, {len(FAILS)} failed")
    sys.exit(1 if FAILS else 0)


def url(port, path):
    return f"http://127.0.0.1:{port}{path}"


def call(port, method, path, body=None, headers=None, timeout=60, chunked=False):
    """(status, body bytes, headers) of one request on a fresh connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {}, encode_chunked=chunked)
        r = c.getresponse()
        return r.status, r.read(), r
    finally:
        c.close()


def read_to_close(s):
    """Everything a raw socket receives until the server closes it (a Connection: close
    answer); closes the socket."""
    resp = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        resp += b
    s.close()
    return resp


def image(seed):
    """One 28x28x1 instance with values in [0, 1), as a client would send it."""
    rnd = random.Random(seed)
    return [[[round(rnd.random(), 6)] for _ in range(28)] for _ in range(28)]


def predict_urllib(port, model, instances, version=None):
    """A TF Serving client, unchanged: POST {"instances": ...}, read "predictions"."""
    path = f"/v1/models/{model}" + (f"/versions/{version}" if version else "") + ":predict"
    data = json.dumps({"instances": instances}).encode()
    req = urllib.request.Request(url(port, path), data=data,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())["predictions"]


def expect_error(port, method, path, body, code, needle=None, headers=None, chunked=False):
    st, raw, _ = call(port, method, path, body, headers, chunked=chunked)
    ok = st == code
    msg = ""
    try:
        msg = json.loads(raw)["error"]
    except Exception:
        ok = False
        msg = f"<not an error JSON: {raw[:200]!r}>"
    if needle is not None and needle not in msg:
        ok = False
    check(ok, f"{method} {path} body {str(body)[:60]!r}: got {st} {msg!r}, "
              f"wanted {code} with {needle!r}")
    return msg


# ---- api -------------------------------------------------------------------------------------

def api(port):
    P = "/v1/models/small_cnn"
    # Status and metadata, as TF Serving writes them.
    st, raw, r = call(port, "GET", P)
    check(st == 200 and json.loads(raw) == {"model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]},
        f"status: {st} {raw[:200]!r}")
    check(r.getheader("Content-Type") == "application/json", "status Content-Type")
    st, raw, _ = call(port, "GET", P + "/versions/1")
    check(st == 200 and b"AVAILABLE" in raw, f"versions/1 status: {st}")
    for path in (P + "/metadata", P + "/versions/1/metadata"):
        st, raw, _ = call(port, "GET", path)
        md = json.loads(raw) if st == 200 else {}
        sig = md.get("metadata", {}).get("signature_def", {}).get("signature_def", {}).get(
            "serving_default", {})
        inp = list(sig.get("inputs", {}).values())
        out = list(sig.get("outputs", {}).values())
        dims = lambda t: [int(d["size"]) for d in t["tensor_shape"]["dim"]]
        check(st == 200 and md["model_spec"] == {"name": "small_cnn", "signature_name": "",
                                                 "version": "1"}
              and len(inp) == 1 and inp[0]["dtype"] == "DT_FLOAT" and dims(inp[0]) == [-1, 28, 28, 1]
              and len(out) == 1 and out[0]["dtype"] == "DT_FLOAT" and dims(out[0]) == [-1, 10]
              and sig.get("method_name") == "tensorflow/serving/predict",
              f"metadata {path}: {st} {raw[:300]!r}")
    # The second model of the server answers under its own name.
    st, raw, _ = call(port, "GET", "/v1/models/second/metadata")
    check(st == 200 and b"second" in raw, f"second model metadata: {st}")

    # predict: rows, columns, named input, signature_name, versions/1.
    x = [image(1), image(2), image(3)]
    rows = predict_urllib(port, "small_cnn", x)
    check(len(rows) == 3 and all(len(p) == 10 for p in rows), f"predict shape {rows!r:.200}")
    check(all(abs(sum(p) - 1) < 1e-5 and min(p) >= 0 for p in rows), "predictions are probabilities")
    check(predict_urllib(port, "small_cnn", x, version=1) == rows, "versions/1:predict == :predict")
    one = [predict_urllib(port, "small_cnn", [xi])[0] for xi in x]
    check(one == rows, "three instances in one request == each alone, bit for bit")
    st, raw, _ = call(port, "POST", P + ":predict", json.dumps({"inputs": x}))
    check(st == 200 and json.loads(raw) == {"outputs": rows}, f"columnar: {st} {raw[:100]!r}")
    st, raw, _ = call(port, "POST", P + ":predict", json.dumps({"inputs": {"input": x}}))
    check(st == 200 and json.loads(raw) == {"outputs": rows}, f"columnar named: {st}")
    st, raw, _ = call(port, "POST", P + ":predict",
                      json.dumps({"signature_name": "serving_default",
                                  "instances": [{"input": xi} for xi in x]}))
    check(st == 200 and json.loads(raw) == {"predictions": rows}, f"named rows: {st}")
    st, raw, _ = call(port, "POST", P + ":predict", json.dumps({"instances": [[[[1]] * 28] * 28]}))
    check(st == 200, f"integers are numbers: {st}")
    # A request larger than --max-batch runs over several batches.
    many = [image(100 + i) for i in range(40)]
    got = predict_urllib(port, "small_cnn", many)
    check(got[:3] != [] and got[39] == predict_urllib(port, "small_cnn", [many[39]])[0],
          "40 instances (over --max-batch) answered row for row")

    # Errors: paths and methods.
    expect_error(port, "GET", "/v1/models/nope", None, 404, "Servable not found for request: Latest(nope)")
    expect_error(port, "POST", "/v1/models/nope:predict", '{"instances": [1]}', 404, "Latest(nope)")
    expect_error(port, "GET", P + "/versions/2", None, 404, "Specific(small_cnn, 2)")
    expect_error(port, "POST", P + "/versions/7:predict", '{"instances": [1]}', 404, "Specific(small_cnn, 7)")
    expect_error(port, "GET", "/nothing/here", None, 404, "Not found")
    expect_error(port, "GET", P + "/labels/x", None, 404, "Malformed request")
    expect_error(port, "POST", P + ":explain", "{}", 404, "Malformed request")
    expect_error(port, "GET", "/v1/models", None, 400, "Missing model name")
    expect_error(port, "GET", P + ":predict", None, 405, "Malformed request")
    expect_error(port, "POST", P, "{}", 405)
    expect_error(port, "PUT", P + "/metadata", "{}", 405)
    expect_error(port, "DELETE", P + ":predict", None, 405)
    expect_error(port, "POST", "/healthz", "", 405)
    st, _, r = call(port, "GET", P + ":predict")
    check(r.getheader("Allow") == "POST", f"405 says Allow: POST ({r.getheader('Allow')})")
    expect_error(port, "POST", P + ":classify", '{"examples": [{"x": 1}]}', 400, "classification")
    expect_error(port, "POST", P + ":regress", '{"examples": [{"x": 1}]}', 400, "regression")

    # Errors: bodies (hostile ones included). Each is a 400 naming what was wrong.
    bad = [
        ("", "The document is empty"),
        ("instances = [1, 2]", "JSON Parse error"),
        ('{"instances": [', "JSON Parse error"),
        ('{"instances": [[[[0.5]]]', "JSON Parse error"),
        ("[" * 100000, "nesting deeper"),
        ('{"a":' * 5000 + "1" + "}" * 5000, "nesting deeper"),
        ('{"instances": [1e999]}', "JSON Parse error"),
        ('{"instances": [123456789012345678901234567890]}', "JSON Parse error"),
        ('{"instances": [NaN]}', "JSON Parse error"),
        ('{"instances": "x"}', "'instances' must be a non-empty list"),
        ('{"instances": []}', "'instances' must be a non-empty list"),
        ('{"instances": [1, 2]}', "instances[0]: expected shape [28, 28, 1]"),
        ('{"instances": [["x"]]}', "instances[0]: expected shape [28, 28, 1]"),
        ('{"instances": null}', "'instances' must be a non-empty list"),
        ('{"inputs": [1], "instances": [1]}', "both"),
        ('{"signature_name": "serving_default"}', "Missing 'inputs' or 'instances'"),
        ('{"signature_name": 100, "instances": [1]}', "'signature_name' key must be a string"),
        ('{"signature_name": "other", "instances": [1]}', 'Serving signature name: "other" not found'),
        ('{"instances": [{"image": 1}]}', "the model has one named input, 'input'"),
        ('{"inputs": {"x": []}}', "the model has one named input"),
        ('{"inputs": 5}', "'inputs': expected shape [-1, 28, 28, 1]"),
        ('[1, 2, 3]', "must be a JSON object"),
        ('{"instances": [1], "instances": [2]}', "JSON Parse error"),
        ('{"instances": ["\xff\xfe"]}'.encode("latin-1"), "JSON Parse error"),
        (b'{"instances": [\x00]}', "JSON Parse error"),
        ("[" + "0," * 120000 + "0]", "more than"),
    ]
    for body, needle in bad:
        expect_error(port, "POST", P + ":predict", body, 400, needle)
    # The message names the instance and the expected shape.
    inst = [image(1), image(2)]
    inst[1][27] = inst[1][27][:5]
    msg = expect_error(port, "POST", P + ":predict", json.dumps({"instances": inst}), 400,
                       "instances[1]: expected shape [28, 28, 1]")
    check("instances[1][27]" in msg and "not 28" in msg, f"message names the row: {msg}")
    inst = [image(1)]
    inst[0][3][4][0] = True
    expect_error(port, "POST", P + ":predict", json.dumps({"instances": inst}), 400,
                 "instances[0][3][4][0] is a boolean")
    inst[0][3][4][0] = 1e300
    expect_error(port, "POST", P + ":predict", json.dumps({"instances": inst}), 400,
                 "out of the float range")
    expect_error(port, "POST", P + ":predict", json.dumps({"instances": [image(0)] * 65}), 400,
                 "at most 64 per request")
    # Bodies over --max-body-bytes: 413, with and without Content-Length.
    big = b'{"instances": [' + b" " * (3 << 20) + b"]}"
    expect_error(port, "POST", P + ":predict", big, 413, "limit")

    def chunks():
        yield b'{"instances": ['
        for _ in range(3 * 16):
            yield b" " * 65536
        yield b"]}"
    expect_error(port, "POST", P + ":predict", chunks(), 413, "limit",
                 headers={"Transfer-Encoding": "chunked"}, chunked=True)

    # Liveness, readiness, metrics.
    st, raw, _ = call(port, "GET", "/healthz")
    check(st == 200, f"healthz {st}")
    st, raw, _ = call(port, "GET", "/readyz")
    check(st == 200, f"readyz {st}")
    st, raw, r = call(port, "GET", "/monitoring/prometheus/metrics")
    text = raw.decode()
    check(st == 200 and r.getheader("Content-Type").startswith("text/plain"), f"metrics {st}")
    val = lambda name: float(next((l.split()[-1] for l in text.splitlines()
                                   if l.startswith(name + " ")), "nan"))
    check(val('sinter_serve_requests_total{code="200"}') >= 10, "metrics count 200s")
    check(val('sinter_serve_errors_total{code="400"}') >= len(bad), "metrics count 400s")
    check(val('sinter_serve_errors_total{code="404"}') >= 6, "metrics count 404s")
    check(val('sinter_serve_errors_total{code="405"}') >= 5, "metrics count 405s")
    check(val('sinter_serve_errors_total{code="413"}') >= 2, "metrics count 413s")
    check(val("sinter_serve_predict_latency_seconds_count") >= 10, "latency histogram counts")
    check(val('sinter_serve_batch_size_count{model="small_cnn"}') >= 10, "batch size histogram")
    check('sinter_serve_predict_latency_seconds_bucket{le="+Inf"}' in text, "histogram has +Inf")
    slow_client(port)
    finish("serve api")


def slow_client(port):
    """A valid request sent a few bytes at a time is answered, with the normal answer."""
    body = json.dumps({"instances": [image(5)]}).encode()
    head = (f"POST /v1/models/small_cnn:predict HTTP/1.1\r\nHost: x\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n").encode()
    data = head + body
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    for i in range(0, len(data), 97):
        s.sendall(data[i:i + 97])
        time.sleep(0.001)
    resp = read_to_close(s)
    check(resp.startswith(b"HTTP/1.1 200"), f"slow client answered: {resp[:80]!r}")
    want = predict_urllib(port, "small_cnn", [image(5)])
    got = json.loads(resp.split(b"\r\n\r\n", 1)[1])["predictions"]
    check(got == want, "slow client's answer == a normal client's")


def stall(port):
    """A client that stops mid-body is disconnected by the idle timeout (--timeout-s 1 in the
    test) while others are served."""
    body = json.dumps({"instances": [image(5)]}).encode()
    head = (f"POST /v1/models/small_cnn:predict HTTP/1.1\r\nHost: x\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    data = head + body
    want = predict_urllib(port, "small_cnn", [image(5)])
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(data[:len(head) + 100])
    check(predict_urllib(port, "small_cnn", [image(5)]) == want, "served while a client stalls")
    t0 = time.monotonic()
    closed = False
    try:
        closed = s.recv(65536) is not None  # b"" (closed) or a 408 before closing
    except (ConnectionResetError, socket.timeout):
        closed = True
    s.close()
    check(closed, "a stalled client is disconnected")
    print(f"stalled client closed after {time.monotonic() - t0:.1f} s")
    finish("serve stall")


# ---- weights ---------------------------------------------------------------------------------

def weights(port, csv_path, idx_gz):
    """Trained weights served over HTTP give what `sinter predict` gives for the same test
    images (its CSV has 6 decimals)."""
    import gzip
    import struct
    with gzip.open(idx_gz, "rb") as f:
        magic, n, rows, cols = struct.unpack(">IIII", f.read(16))
        raw = f.read(rows * cols * 4)
    with open(csv_path) as f:
        lines = f.read().split("\n")[1:]
    want = [[float(v) for v in l.split(",")[3:]] for l in lines if l]
    # Pixels as the CLI's pipeline makes them: u8 / 255 in float32 (exact in JSON via repr).
    to_f32 = lambda v: struct.unpack("f", struct.pack("f", v / 255.0))[0]
    xs = [[[[to_f32(raw[k * rows * cols + r * cols + c])] for c in range(cols)] for r in range(rows)]
          for k in range(len(want))]
    got = predict_urllib(port, "small_cnn", xs)
    for k in range(len(want)):
        check(len(got[k]) == len(want[k]) and
              all(abs(a - b) <= 5.1e-7 for a, b in zip(got[k], want[k])),
              f"image {k}: served {got[k][:3]} != sinter predict {want[k][:3]}")
    finish("serve weights")


# ---- batch -------------------------------------------------------------------------------------

def batch(port, refport):
    """Concurrent single-instance requests, batched by the server (long batch timeout,
    --max-batch 8), give the rows that the reference server gives each of them alone."""
    n = 8
    xs = [image(1000 + i) for i in range(n)]
    alone = [predict_urllib(refport, "small_cnn", [x])[0] for x in xs]
    for rnd in range(3):
        got = [None] * n
        bar = threading.Barrier(n)

        def worker(i):
            bar.wait()
            got[i] = predict_urllib(port, "small_cnn", [xs[i]])[0]
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        for i in range(n):
            check(got[i] == alone[i], f"round {rnd} request {i}: batched {got[i][:2]} != alone {alone[i][:2]}")
        # Odd sizes: a 3-row and a 2-row request with others (padding to the bucket).
    st, raw, _ = call(port, "GET", "/monitoring/prometheus/metrics")
    text = raw.decode()
    sizes = {}
    for l in text.splitlines():
        if l.startswith('sinter_serve_batch_size_bucket{model="small_cnn",le="') and "+Inf" not in l:
            le = int(l.split('le="')[1].split('"')[0])
            sizes[le] = int(l.split()[-1])
    batches = int(float(next(l.split()[-1] for l in text.splitlines()
                             if l.startswith('sinter_serve_batch_size_count{model="small_cnn"}'))))
    print(f"batches {batches}, batches of 1 row: {sizes.get(1)}")
    # With a 10 s batch timeout and 8 requests for a batch of 8, the requests share runs.
    check(sizes.get(1, 0) < batches, f"the server batched rows of different requests ({sizes}, {batches})")
    finish("serve batch")


# ---- load ----------------------------------------------------------------------------------------

def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for l in f:
            if l.startswith("VmRSS:"):
                return int(l.split()[1])
    return 0


def load(port, pid, seconds, conns):
    """conns clients for `seconds`: valid requests (answers checked bit for bit), malformed
    ones (400), oversize ones (413) and slow ones (sent in pieces; 200). Bounded: every client
    stops at the deadline; every request has a 60 s socket timeout."""
    ref_x = [image(7), image(8)]
    ref = predict_urllib(port, "small_cnn", ref_x)
    valid = json.dumps({"instances": ref_x}).encode()
    malformed = [b'{"instances": [1, 2]}', b'{"instances": [', b"[" * 5000, b'{"instances": "x"}']
    oversize = b'{"instances": [' + b" " * (3 << 20) + b"]}"

    def warm():
        for _ in range(50):
            call(port, "POST", "/v1/models/small_cnn:predict", valid)
    warm()
    rss0 = rss_kb(pid)
    counts = {"valid": 0, "valid_failed": 0, "bad": 0, "bad_wrong": 0, "big": 0, "big_wrong": 0,
              "slow": 0, "slow_failed": 0}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def bump(k):
        with lock:
            counts[k] += 1

    def client(i):
        rnd = random.Random(i)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while time.monotonic() < end:
            kind = rnd.random()
            try:
                if kind < 0.70:
                    c.request("POST", "/v1/models/small_cnn:predict", body=valid)
                    r = c.getresponse()
                    body = r.read()
                    ok = r.status == 200 and json.loads(body)["predictions"] == ref
                    bump("valid" if ok else "valid_failed")
                    if not ok:
                        print("valid failed:", r.status, body[:200], file=sys.stderr)
                elif kind < 0.85:
                    c.request("POST", "/v1/models/small_cnn:predict", body=rnd.choice(malformed))
                    r = c.getresponse()
                    r.read()
                    bump("bad" if r.status == 400 else "bad_wrong")
                elif kind < 0.92:
                    c.close()
                    st, _, _ = call(port, "POST", "/v1/models/small_cnn:predict", oversize)
                    bump("big" if st == 413 else "big_wrong")
                    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                else:
                    s = socket.create_connection(("127.0.0.1", port), timeout=60)
                    data = (b"POST /v1/models/small_cnn:predict HTTP/1.1\r\nHost: x\r\n"
                            b"Connection: close\r\nContent-Length: " + str(len(valid)).encode() +
                            b"\r\n\r\n" + valid)
                    for k in range(0, len(data), 512):
                        s.sendall(data[k:k + 512])
                        time.sleep(0.0005)
                    resp = read_to_close(s)
                    ok = resp.startswith(b"HTTP/1.1 200") and \
                        json.loads(resp.split(b"\r\n\r\n", 1)[1])["predictions"] == ref
                    bump("slow" if ok else "slow_failed")
            except Exception as e:  # a failed valid request counts; others too
                print("client error:", repr(e), file=sys.stderr)
                bump("valid_failed" if kind < 0.70 else "bad_wrong" if kind < 0.85 else
                     "big_wrong" if kind < 0.92 else "slow_failed")
                c.close()
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.close()

    ts = [threading.Thread(target=client, args=(i,)) for i in range(conns)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    warm()
    rss1 = rss_kb(pid)
    print(f"load: {seconds} s, {conns} connections: {counts}; RSS {rss0 // 1024} MB -> "
          f"{rss1 // 1024} MB")
    check(counts["valid"] > 0 and counts["valid_failed"] == 0, f"valid requests all answered: {counts}")
    check(counts["bad_wrong"] == 0, f"malformed ones all 400: {counts}")
    check(counts["big_wrong"] == 0, f"oversize ones all 413: {counts}")
    check(counts["slow_failed"] == 0, f"slow ones all answered: {counts}")
    # Memory stays flat: allocator caches may grow a little, a leak per request would not.
    check(rss1 - rss0 < 64 * 1024, f"RSS grew {(rss1 - rss0) // 1024} MB (allowed 64)")
    check(predict_urllib(port, "small_cnn", ref_x) == ref, "the server answers after the load")
    finish("serve load")


# ---- drain -----------------------------------------------------------------------------------------

def drain(port, pid):
    """Three requests wait in the batcher (10 s batch timeout, --max-batch 8), and a fourth has
    sent its headers and half its body; SIGTERM then must answer all four (the fourth's body
    ends after the signal) and let the process exit (test_serve.sh checks its status)."""
    n = 3
    xs = [image(2000 + i) for i in range(n + 1)]
    got = [None] * (n + 1)
    signalled = threading.Event()

    def worker(i):
        try:
            got[i] = predict_urllib(port, "small_cnn", [xs[i]])[0]
        except Exception as e:
            got[i] = repr(e)

    def late_body():
        try:
            body = json.dumps({"instances": [xs[n]]}).encode()
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
            s.sendall(b"POST /v1/models/small_cnn:predict HTTP/1.1\r\nHost: x\r\n"
                      b"Content-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(body) + body[:len(body) // 2])
            signalled.wait(60)
            s.sendall(body[len(body) // 2:])
            raw = read_to_close(s)
            head, _, payload = raw.partition(b"\r\n\r\n")
            got[n] = (json.loads(payload)["predictions"][0] if head.startswith(b"HTTP/1.1 200")
                      else head.decode(errors="replace")[:120])
        except Exception as e:
            got[n] = repr(e)
    ts = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    ts.append(threading.Thread(target=late_body))
    [t.start() for t in ts]
    # Wait (bounded) until the server holds all four: the in-flight gauge counts this scrape too.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        st, raw, _ = call(port, "GET", "/monitoring/prometheus/metrics")
        line = next(l for l in raw.decode().splitlines() if l.startswith("sinter_serve_inflight_requests "))
        if int(line.split()[-1]) >= n + 2:
            break
        time.sleep(0.01)
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.2)
    signalled.set()
    [t.join() for t in ts]
    for i in range(n):
        check(isinstance(got[i], list) and len(got[i]) == 10, f"in-flight request {i} answered: {got[i]!r:.200}")
    check(isinstance(got[n], list) and len(got[n]) == 10,
          f"request whose body ended after SIGTERM answered: {got[n]!r:.200}")
    finish("serve drain")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "api":
        api(int(sys.argv[2]))
    elif cmd == "batch":
        batch(int(sys.argv[2]), int(sys.argv[3]))
    elif cmd == "load":
        load(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
    elif cmd == "stall":
        stall(int(sys.argv[2]))
    elif cmd == "weights":
        weights(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    elif cmd == "drain":
        drain(int(sys.argv[2]), int(sys.argv[3]))
    else:
        sys.exit(f"unknown command {cmd}")
