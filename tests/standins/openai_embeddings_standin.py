#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A local stand-in for an OpenAI-compatible embeddings endpoint
(POST /v1/embeddings), for memd's tests. It is NOT OpenAI: it follows the
public API's request and response shapes and its refusals, and makes
deterministic vectors (feature hashing of the words, L2-normalized, so
texts that share words are near each other). Standard library only.

Like the OpenAI API it refuses (with {"error": {"message", "type",
"param", "code"}}): a missing or wrong "Authorization: Bearer" key when
started with --api-key (401), a body that is not JSON or lacks model or
input, an empty string input, more inputs than the batch limit (400).
It answers {"object": "list", "data": [{"object": "embedding", "index",
"embedding"}], "model", "usage"}; encoding_format float (default) or
base64; "dimensions" sets the size.

Test hooks (not OpenAI endpoints; under /__standin/):
  POST /__standin/models {"model": M, ...} sets, for requests naming
       model M: "dim" (vector size), "max_batch" (inputs per request),
       "mode": "ok" | "fail" (answer "status", default 500) | "timeout"
       (answer after "delay_ms", default 10000) | "drop" (close the
       connection), "count" (the mode lasts that many requests, then
       "ok"; absent = until changed), "reverse" (list data in reverse
       order; clients must use "index");
  GET  /__standin/requests[?model=M]  every request: model, inputs
       (count), status, auth ("ok" | "missing" | "wrong").

Start: openai_embeddings_standin.py [--port 0] [--api-key KEY]
[--dim 8] [--max-batch 2048]; prints "PORT <n>" once listening on
127.0.0.1.
"""

import argparse
import base64
import hashlib
import json
import math
import re
import struct
import threading
import time

import standin_http

CONTROL_PREFIX = "/__standin/"
EMBEDDINGS_PATH = "/v1/embeddings"
DEFAULT_TIMEOUT_DELAY_MS = 10000
MAX_BODY = 64 * 1024 * 1024
WORD = re.compile(r"\w+", re.UNICODE)


def embed(text, dim):
    """Feature hashing of the lower-cased words: deterministic, and texts
    that share words get similar vectors."""
    v = [0.0] * dim
    words = WORD.findall(text.lower()) or [text]
    for w in words:
        h = hashlib.sha256(w.encode("utf-8")).digest()
        idx = int.from_bytes(h[:4], "little") % dim
        v[idx] += 1.0 if h[4] & 1 else -1.0
    n = math.sqrt(sum(x * x for x in v))
    if n == 0:  # words cancelled out: fall back to one hashed axis
        v[int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little") % dim] = 1.0
        n = 1.0
    return [x / n for x in v]


class ApiError(Exception):
    def __init__(self, status, message, etype="invalid_request_error", param=None,
                 code=None):
        super().__init__(message)
        self.status, self.message = status, message
        self.etype, self.param, self.code = etype, param, code


class State:
    def __init__(self, api_key, dim, max_batch):
        self.api_key = api_key
        self.dim = dim
        self.max_batch = max_batch
        self.lock = threading.Lock()
        self.models = {}
        self.requests = []

    def model(self, name):
        m = {"dim": self.dim, "max_batch": self.max_batch, "mode": "ok"}
        m.update(self.models.get(name, {}))
        return m

    def consume(self, name):
        """The model's settings for this request (counting down a mode)."""
        with self.lock:
            m = self.model(name)
            cfg = self.models.get(name)
            if cfg and cfg.get("mode", "ok") != "ok" and cfg.get("count") is not None:
                cfg["count"] -= 1
                if cfg["count"] <= 0:
                    cfg["mode"] = "ok"
                    del cfg["count"]
            return m


class Handler(standin_http.JsonHandler):
    server_version = "openai-embeddings-standin"
    max_body = MAX_BODY

    def do_GET(self):
        st = self.server.state
        path, _, query = self.path.partition("?")
        if path == CONTROL_PREFIX + "requests":
            want = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("model")
            with st.lock:
                return self.send(200, [r for r in st.requests
                                       if want is None or r["model"] == want])
        self.send(404, {"error": {"message": "Unknown request URL: GET %s" % path,
                                  "type": "invalid_request_error", "param": None,
                                  "code": "unknown_url"}})

    def do_POST(self):
        st = self.server.state
        raw = self.body()
        if self.path == CONTROL_PREFIX + "models":
            cfg = json.loads(raw)
            with st.lock:
                st.models.setdefault(cfg["model"], {}).update(
                    {k: v for k, v in cfg.items() if k != "model"})
            return self.send(200, {"ok": True})
        rec = {"model": None, "inputs": 0, "status": None, "auth": "ok"}
        try:
            if self.path != EMBEDDINGS_PATH:
                raise ApiError(404, "Unknown request URL: POST %s" % self.path,
                               code="unknown_url")
            auth = self.headers.get("Authorization")
            if st.api_key is not None:
                if auth is None:
                    rec["auth"] = "missing"
                elif auth != "Bearer " + st.api_key:
                    rec["auth"] = "wrong"
            try:
                req = json.loads(raw)
            except ValueError:
                req = None
            if isinstance(req, dict) and isinstance(req.get("model"), str):
                rec["model"] = req["model"]
            with st.lock:
                st.requests.append(rec)
            if rec["auth"] != "ok":
                raise ApiError(401, "Incorrect API key provided." if rec["auth"] == "wrong"
                               else "You didn't provide an API key.",
                               code="invalid_api_key")
            if not isinstance(req, dict):
                raise ApiError(400, "We could not parse the JSON body of your request.")
            if not isinstance(req.get("model"), str):
                raise ApiError(400, "you must provide a model parameter", param="model")
            m = st.consume(req["model"])
            if m["mode"] == "drop":
                rec["status"] = "dropped"
                self.close_connection = True
                self.connection.shutdown(2)
                return
            if m["mode"] == "timeout":
                time.sleep(m.get("delay_ms", DEFAULT_TIMEOUT_DELAY_MS) / 1000.0)
            if m["mode"] == "fail":
                raise ApiError(m.get("status", 500), "The server had an error while "
                               "processing your request (stand-in fault).",
                               etype="server_error")
            inputs = req.get("input")
            if isinstance(inputs, str):
                inputs = [inputs]
            if (not isinstance(inputs, list) or not inputs or
                    not all(isinstance(x, str) and x for x in inputs)):
                raise ApiError(400, "'$.input' is invalid. Please check the API reference.",
                               param="input")
            rec["inputs"] = len(inputs)
            if len(inputs) > m["max_batch"]:
                raise ApiError(400, "'$.input' is too long. Maximum length is %d." %
                               m["max_batch"], param="input")
            fmt = req.get("encoding_format", "float")
            if fmt not in ("float", "base64"):
                raise ApiError(400, "'%s' is not one of ['float', 'base64'] - "
                               "'encoding_format'" % fmt, param="encoding_format")
            dim = req.get("dimensions", m["dim"])
            if not isinstance(dim, int) or dim < 1:
                raise ApiError(400, "'$.dimensions' is invalid.", param="dimensions")
            data = []
            for i, text in enumerate(inputs):
                v = embed(text, dim)
                if fmt == "base64":
                    v = base64.b64encode(struct.pack("<%df" % dim, *v)).decode()
                data.append({"object": "embedding", "index": i, "embedding": v})
            if m.get("reverse"):
                data.reverse()
            tokens = sum(len(WORD.findall(t)) for t in inputs)
            rec["status"] = 200
            self.send(200, {"object": "list", "data": data, "model": req["model"],
                            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
        except ApiError as e:
            rec["status"] = e.status
            self.send(e.status, {"error": {"message": e.message, "type": e.etype,
                                           "param": e.param, "code": e.code}})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--max-batch", type=int, default=2048)
    args = ap.parse_args()
    standin_http.serve(args.port, Handler, State(args.api_key, args.dim, args.max_batch))


if __name__ == "__main__":
    main()
