# SPDX-License-Identifier: MIT
"""What the tests need besides memd: the server's address, and small
local HTTP servers that stand in for conditions memd cannot produce on
demand (a 503 with Retry-After, a dropped connection, a stall, an
answer lost after memd performed the request)."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import threading
import unittest
import urllib.parse
from typing import Any, Dict, List, Tuple, TypeVar

from memd_client import Client, uuid7

STALL_MAX = 60.0  # seconds a stalled stand-in holds a request at most


def memd_url() -> str:
    """The real memd the suite runs against (tests/clients/python_test.sh
    starts it); the tests that need it are skipped without it."""
    url = os.environ.get("MEMD_URL")
    if not url:
        raise unittest.SkipTest("MEMD_URL is not set: run through `meson test client-python`")
    return url


def memd_client(**options: Any) -> Client:
    """A Client of the real memd with the suite's admin key."""
    options.setdefault("api_key", os.environ.get("MEMD_API_KEY"))
    return Client(memd_url(), **options)


def fresh(prefix: str) -> str:
    """A name no other test (or earlier run) uses."""
    return f"{prefix}-{uuid7()}"


class Seen:
    """A request a stand-in received, as it came."""

    def __init__(self, method: str, target: str, headers: Any, body: bytes) -> None:
        self.method = method
        self.target = target  # the raw request target: path and query, encoded
        self.path, _, self.query = target.partition("?")
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))

    def query_pairs(self) -> List[Tuple[str, str]]:
        return urllib.parse.parse_qsl(
            self.query, keep_blank_values=True, strict_parsing=bool(self.query)
        )


class _Handler(http.server.BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        seen = Seen(self.command, self.path, self.headers, body)
        self.server.owner._handle(self, seen)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    owner: "_Base"


_B = TypeVar("_B", bound="_Base")


class _Base:
    """A ThreadingHTTPServer on a free loopback port, in a thread; a
    context manager that stops it."""

    def __init__(self) -> None:
        self.seen: List[Seen] = []
        self.lock = threading.Lock()
        self.release = threading.Event()  # ends every stall
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def __enter__(self: _B) -> _B:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _record(self, seen: Seen) -> None:
        with self.lock:
            self.seen.append(seen)

    def _handle(self, handler: _Handler, seen: Seen) -> None:
        raise NotImplementedError

    @staticmethod
    def answer(handler: _Handler, status: int, body: bytes, headers: Dict[str, str]) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


class StandIn(_Base):
    """A stand-in for memd that answers by a script: each request takes
    the next step, ("answer", status, json_body, headers), ("drop",) (the
    connection is closed without an answer) or ("stall",) (no answer
    until the stand-in is closed); with no step left it answers 200 and
    {}. Every request is kept in seen, with its raw target."""

    def __init__(self, *steps: Tuple[Any, ...]) -> None:
        self.steps = list(steps)
        super().__init__()

    def _handle(self, handler: _Handler, seen: Seen) -> None:
        self._record(seen)
        with self.lock:
            step = self.steps.pop(0) if self.steps else ("answer", 200, {}, {})
        if step[0] == "drop":
            handler.close_connection = True
            return
        if step[0] == "stall":
            self.release.wait(STALL_MAX)
            handler.close_connection = True
            return
        _, status, body, headers = step
        raw = b"" if body is None else json.dumps(body).encode("utf-8")
        hdrs = {
            "Content-Type": "application/json",
            "X-Request-Id": seen.headers.get("X-Request-Id", ""),
        }
        hdrs.update(headers)
        self.answer(handler, status, raw, hdrs)


class LossyProxy(_Base):
    """A proxy in front of the real memd that loses answers: the first
    `drops` requests matching (method, path suffix) are forwarded to memd,
    which performs them, and their answers are dropped (the connection
    closes without one), as when a network fails after the request
    arrived. Every other request is relayed both ways."""

    def __init__(self, upstream: str, method: str, suffix: str, drops: int = 1) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        self.method = method
        self.suffix = suffix
        self.drops = drops
        self.dropped = 0
        super().__init__()

    def _handle(self, handler: _Handler, seen: Seen) -> None:
        self._record(seen)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=STALL_MAX)
        try:
            headers = {
                k: v for k, v in seen.headers.items() if k.lower() not in ("host", "connection")
            }
            conn.request(seen.method, seen.target, body=seen.body or None, headers=headers)
            resp = conn.getresponse()
            body = resp.read()
            with self.lock:
                drop = (
                    seen.method == self.method
                    and seen.path.endswith(self.suffix)
                    and self.dropped < self.drops
                )
                if drop:
                    self.dropped += 1
            if drop:
                handler.close_connection = True
                return
            hop = ("connection", "content-length", "transfer-encoding")
            hdrs = {k: v for k, v in resp.getheaders() if k.lower() not in hop}
            self.answer(handler, resp.status, body, hdrs)
        finally:
            conn.close()
