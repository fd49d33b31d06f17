#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A local webhook receiver for memd's tests of its signed webhooks (the
lanes' finalize webhook). It checks every delivery the way a receiver
should, independently of memd's code: the body is JSON sent as
"Content-Type: application/json", "X-Memd-Timestamp" is a decimal unix
time, and "X-Memd-Signature" is "sha256=" + the lowercase hex
HMAC-SHA256 of "<timestamp>.<body>" under the shared secret (Python's
hmac). A delivery that fails a check gets 401 (bad signature) or 400.
Standard library only.

Deliveries to any path are accepted; plans and records are kept per
path, so tests running at once each use a path of their own.

Test hooks (under /__standin/):
  POST /__standin/plan {"path": P, "fail": N, "status": S, "mode": "fail"
       | "drop" | "delay", "delay_ms": D, "retry_after": R}: the next N
       deliveries to path P that pass the checks are answered with status
       S (default 500, with "Retry-After: R" when given), or the
       connection is closed (drop), or answered 200 after D ms (delay);
       then 200 again.
  GET  /__standin/requests[?path=P] every delivery (to P): path,
       timestamp, signature, signature_ok, content_type, body (text),
       status (answered, or "dropped").

Start: webhook_standin.py --secret KEY [--port 0]; prints "PORT <n>"
once listening on 127.0.0.1.
"""

import argparse
import hashlib
import hmac
import json
import threading
import time
import urllib.parse

import standin_http

CONTROL_PREFIX = "/__standin/"
MAX_BODY = 16 * 1024 * 1024
SIGNATURE_PREFIX = "sha256="


class State:
    def __init__(self, secret):
        self.secret = secret.encode()
        self.lock = threading.Lock()
        self.requests = []
        self.plans = {}

    def next_fault(self, path):
        """The plan's answer for this delivery to path, or None for 200."""
        with self.lock:
            plan = self.plans.get(path)
            if not plan or plan.get("fail", 0) <= 0:
                return None
            plan["fail"] -= 1
            return dict(plan)


class Handler(standin_http.JsonHandler):
    server_version = "webhook-standin"
    max_body = MAX_BODY

    def do_GET(self):
        st = self.server.state
        path, _, query = self.path.partition("?")
        if path == CONTROL_PREFIX + "requests":
            want = urllib.parse.parse_qs(query).get("path", [None])[0]
            with st.lock:
                return self.send(200, [r for r in st.requests
                                       if want is None or r["path"] == want])
        self.send(404, {"error": "no such path"})

    def do_POST(self):
        st = self.server.state
        raw = self.body()
        if self.path == CONTROL_PREFIX + "plan":
            plan = json.loads(raw)
            with st.lock:
                st.plans[plan.pop("path")] = plan
            return self.send(200, {"ok": True})
        ts = self.headers.get("X-Memd-Timestamp") or ""
        sig = self.headers.get("X-Memd-Signature") or ""
        want = SIGNATURE_PREFIX + hmac.new(st.secret, ts.encode() + b"." + raw,
                                           hashlib.sha256).hexdigest()
        rec = {"path": self.path, "timestamp": ts, "signature": sig,
               "signature_ok": hmac.compare_digest(sig, want),
               "content_type": self.headers.get("Content-Type"),
               "body": raw.decode("utf-8", "replace"), "status": None}
        with st.lock:
            st.requests.append(rec)
        try:
            json.loads(raw)
            body_ok = True
        except ValueError:
            body_ok = False
        if not ts.isdigit() or rec["content_type"] != "application/json" or not body_ok:
            rec["status"] = 400
            return self.send(400, {"error": "want a JSON body, its content type and a "
                                            "decimal X-Memd-Timestamp"})
        if not rec["signature_ok"]:
            rec["status"] = 401
            return self.send(401, {"error": "bad signature"})
        fault = st.next_fault(self.path)
        if fault and fault.get("mode") == "drop":
            rec["status"] = "dropped"
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault and fault.get("mode") == "delay":
            time.sleep(fault.get("delay_ms", 0) / 1000.0)
            fault = None
        if fault:
            status = fault.get("status", 500)
            extra = {}
            if "retry_after" in fault:
                extra["Retry-After"] = str(fault["retry_after"])
            rec["status"] = status
            return self.send(status, {"error": "planned failure"}, extra)
        rec["status"] = 200
        self.send(200, {"ok": True})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--secret", required=True)
    args = ap.parse_args()
    standin_http.serve(args.port, Handler, State(args.secret))


if __name__ == "__main__":
    main()
