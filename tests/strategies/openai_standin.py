#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A local stand-in for an OpenAI-compatible chat completions server, for
tests only (no LLM can run here). It follows the published contract of
POST /v1/chat/completions: a JSON body {"model", "messages": [{"role",
"content"}], ...} answered by {"id", "object": "chat.completion", "created",
"model", "choices": [{"index", "message": {"role": "assistant", "content"},
"finish_reason"}], "usage"}; errors as {"error": {"message", "type"}} with an
HTTP status.

The model name picks the behaviour, so one server serves every case:
  ok        a summary: every line of the user message that holds a digit or
            a capitalised name (so facts survive), prefixed "Summary:"
  hold      as ok, once the test has sent POST /release (at most HOLD_MAX_SECONDS
            later): a summary in flight for as long as the test needs one
  flaky429  429 with Retry-After: 0 on every odd request, else as ok
  error500  always 500
  garbage   200 with a body that is not JSON
  empty     200 with {"choices": []}
  auth      as ok if "Authorization: Bearer test-key" was sent, else 401
GET /stats answers {"<model>": <requests>, ..., "holding": <hold requests
not answered yet>}.

Prints the port it listens on (127.0.0.1, chosen by the OS) on its first
line of stdout, then serves until killed or stdin closes.
"""
import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOLD_MAX_SECONDS = 60.0
counts = {}
holding = 0
released = threading.Event()
lock = threading.Lock()


def summary_of(messages):
    user = "\n".join(m.get("content", "") for m in messages if m.get("role") == "user")
    keep = [line.strip() for line in user.splitlines()
            if re.search(r"\d|\b[A-Z][a-z]+", line) and not line.endswith(":")]
    return "Summary: " + " ".join(keep)[:2000]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet
        pass

    def send(self, status, body, content_type="application/json", headers=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, message, headers=()):
        self.send(status, json.dumps({"error": {"message": message, "type": "stand_in"}}),
                  headers=headers)

    def do_GET(self):
        if self.path == "/stats":
            with lock:
                self.send(200, json.dumps(dict(counts, holding=holding)))
        else:
            self.error(404, "not found")

    def do_POST(self):
        global holding
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        if self.path == "/release":
            released.set()
            self.send(200, "{}")
            return
        if self.path != "/v1/chat/completions":
            self.error(404, "not found: " + self.path)
            return
        try:
            req = json.loads(raw)
            model = req["model"]
            messages = req["messages"]
            assert isinstance(messages, list) and messages
        except Exception:
            self.error(400, "bad request body")
            return
        with lock:
            counts[model] = counts.get(model, 0) + 1
            n = counts[model]
        if model == "hold":
            with lock:
                holding += 1
            released.wait(HOLD_MAX_SECONDS)
            with lock:
                holding -= 1
        elif model == "flaky429" and n % 2 == 1:
            self.error(429, "rate limited", headers=[("Retry-After", "0")])
            return
        elif model == "error500":
            self.error(500, "internal error")
            return
        elif model == "garbage":
            self.send(200, "<html>definitely not json", content_type="text/html")
            return
        elif model == "empty":
            self.send(200, json.dumps({"id": "x", "object": "chat.completion", "choices": []}))
            return
        elif model == "auth" and self.headers.get("Authorization") != "Bearer test-key":
            self.error(401, "invalid api key")
            return
        content = summary_of(messages)
        self.send(200, json.dumps({
            "id": "chatcmpl-standin-%d" % n,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }))


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # the test closes our stdin (or dies): stop
    server.shutdown()


if __name__ == "__main__":
    main()
