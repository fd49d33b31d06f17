# SPDX-License-Identifier: MIT
"""One HTTP exchange with memd, with retries: urllib.request, JSON
bodies, the API key as a Bearer token, backoff with full jitter, and
Retry-After."""

from __future__ import annotations

import email.utils
import http.client
import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from email.message import Message
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from ._ids import uuid7
from .errors import MemdError, NetworkError, Timeout, error_from_answer

__version__ = "0.1.0"

RETRY_AFTER_MAX = 60.0  # seconds: a longer Retry-After is waited only this long
_RETRY_STATUSES = (429, 503)  # answers that mean nothing was written

Query = Mapping[str, Any]


class Answer:
    """A 2xx answer: its status, headers and body bytes."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: Message, body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        """The body parsed as JSON, None when there is none (204)."""
        if self.status == 204 or not self.body:
            return None
        return json.loads(self.body.decode("utf-8"))


def path_of(template: Sequence[str], *values: str) -> str:
    """The path made of literal pieces and percent-encoded values, taken
    in turn: path_of(["/v1/apps/", "/jobs"], app) (every value encoded
    whole: a "/" in an id is sent as %2F, which memd refuses)."""
    out = [template[0]]
    for value, piece in zip(values, template[1:]):
        if not isinstance(value, str):
            raise TypeError(f"a path parameter must be a str, not {type(value).__name__}")
        out.append(urllib.parse.quote(value, safe=""))
        out.append(piece)
    return "".join(out)


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_query_value(v) for v in value)
    return str(value)


def query_string(query: Optional[Query]) -> str:
    """"?a=1&b=x" of the members that are not None ("" when none is):
    booleans as true/false, lists comma-separated, every value
    percent-encoded (a "+" as %2B, as memd reads "+" as a space)."""
    if not query:
        return ""
    pairs = [(k, _query_value(v)) for k, v in query.items() if v is not None]
    if not pairs:
        return ""
    return "?" + urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote, safe="")


def retry_after_seconds(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Retry-After as seconds to wait (delta-seconds or an HTTP date),
    at most RETRY_AFTER_MAX; None when absent or unreadable."""
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), RETRY_AFTER_MAX)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    delta = when.timestamp() - (time.time() if now is None else now)
    return min(max(delta, 0.0), RETRY_AFTER_MAX)


class _NoAnswer(Exception):
    """An attempt that got no answer; sent: whether the request may have
    reached memd (a refused connection was never sent)."""

    def __init__(self, error: MemdError, sent: bool) -> None:
        super().__init__(error.message)
        self.error = error
        self.sent = sent


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, (socket.timeout, TimeoutError)) or (
        isinstance(exc, urllib.error.URLError)
        and isinstance(exc.reason, (socket.timeout, TimeoutError))
    )


class Transport:
    """What every call goes through; see Client for the options."""

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str],
        timeout: float,
        retries: int,
        retry_base: float,
        retry_max: float,
        headers: Optional[Mapping[str, str]],
        sleep: Callable[[float], None],
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http:// or https:// URL, not {base_url!r}")
        if retries < 0:
            raise ValueError("retries must be 0 or more")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.retries = retries
        self.retry_base = retry_base
        self.retry_max = retry_max
        self.headers = dict(headers or {})
        self.sleep = sleep
        self._opener = urllib.request.build_opener()

    def backoff(self, attempt: int) -> float:
        """Full jitter: a random wait up to retry_base * 2^attempt, capped."""
        return random.uniform(0.0, min(self.retry_max, self.retry_base * (2 ** attempt)))

    def request(
        self,
        method: str,
        path: str,
        query: Optional[Query] = None,
        body: Optional[bytes] = None,
        content_type: Optional[str] = None,
        *,
        safe: bool,
        timeout: Optional[float] = None,
        headers: Optional[Mapping[str, str]] = None,
        extra_headers: Optional[Mapping[str, str]] = None,
    ) -> Answer:
        """Send the request until it is answered, retrying a 503 or 429
        (after Retry-After, else a backoff) and, when safe (repeating it
        cannot do it twice), a failure without an answer; a refused
        connection is retried for every call (nothing was sent). Returns
        the 2xx answer; raises MemdError for any other, or when the
        retries are spent. One X-Request-Id (the caller's, else a new
        UUIDv7) is sent with every attempt."""
        url = self.base_url + path + query_string(query)
        hdrs: Dict[str, str] = {
            "Accept": "application/json",
            "User-Agent": f"memd-client-python/{__version__}",
        }
        if self.api_key:
            hdrs["Authorization"] = f"Bearer {self.api_key}"
        hdrs.update(self.headers)
        if extra_headers:
            hdrs.update(extra_headers)
        if headers:
            hdrs.update(headers)
        if content_type is not None:
            hdrs["Content-Type"] = content_type
        if not any(k.lower() == "x-request-id" for k in hdrs):
            hdrs["X-Request-Id"] = uuid7()
        request_id = next(v for k, v in hdrs.items() if k.lower() == "x-request-id")
        wait = self.timeout if timeout is None else timeout

        lost_answer = False  # an earlier attempt may have been performed
        attempt = 0
        while True:
            try:
                status, answer_headers, raw = self._once(
                    method, url, body, hdrs, wait, request_id, safe
                )
            except _NoAnswer as no:
                no.error.after_lost_answer = lost_answer or no.sent
                if attempt >= self.retries or (no.sent and not safe):
                    raise no.error from None
                lost_answer = lost_answer or no.sent
                delay = self.backoff(attempt)
            else:
                if 200 <= status < 300:
                    return Answer(status, answer_headers, raw)
                error = error_from_answer(status, answer_headers, raw)
                if error.request_id is None:
                    error.request_id = request_id
                error.after_lost_answer = lost_answer
                if status not in _RETRY_STATUSES or attempt >= self.retries:
                    raise error
                after = retry_after_seconds(answer_headers.get("Retry-After"))
                delay = self.backoff(attempt) if after is None else after
            self.sleep(delay)
            attempt += 1

    def _once(
        self,
        method: str,
        url: str,
        body: Optional[bytes],
        headers: Mapping[str, str],
        timeout: float,
        request_id: str,
        safe: bool,
    ) -> Tuple[int, Message, bytes]:
        req = urllib.request.Request(url, data=body, headers=dict(headers), method=method)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            try:
                raw = e.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            return e.code, e.headers, raw
        except (OSError, http.client.HTTPException, urllib.error.URLError) as e:
            reason = e.reason if isinstance(e, urllib.error.URLError) else e
            refused = isinstance(reason, (ConnectionRefusedError, socket.gaierror))
            if _is_timeout(e):
                err: MemdError = Timeout(
                    0, "timeout", f"no answer within {timeout:g} s", safe, request_id
                )
            else:
                err = NetworkError(
                    0, "network", f"{type(reason).__name__}: {reason}", safe or refused, request_id
                )
            raise _NoAnswer(err, sent=not refused) from e
