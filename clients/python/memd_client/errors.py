# SPDX-License-Identifier: MIT
"""The errors the client raises: MemdError and a subclass per common
code. memd answers every error with one body,
``{"error": {"code", "message", "retryable"}}``; the client's own
failures (no answer) have status 0 and the codes ``network`` or
``timeout``."""

from __future__ import annotations

import json
from email.message import Message
from typing import Any, Dict, Optional, Type


class MemdError(Exception):
    """A call that did not succeed.

    status: the HTTP status, 0 when no answer came (network, timeout).
    code: memd's error code (``not_found``, ``conflict``, ...), or the
        client's own: ``network``, ``timeout``.
    message: memd's message, or what the client saw.
    retryable: memd's flag; for the client's own errors, whether the
        call would have been safe to repeat.
    request_id: the X-Request-Id of the request.
    body: the parsed error body (a 409 of a turn also names the holder),
        or None.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retryable: bool = False,
        request_id: Optional[str] = None,
        body: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.request_id = request_id
        self.body = body
        # True when an earlier attempt of the call may have been performed
        # (its answer was lost); create_session and the deletes use it.
        self.after_lost_answer = False

    def __str__(self) -> str:
        where = f"HTTP {self.status}" if self.status else "no answer"
        rid = f", request {self.request_id}" if self.request_id else ""
        return f"{self.code}: {self.message} ({where}{rid})"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, retryable={self.retryable!r}, "
            f"request_id={self.request_id!r})"
        )


class InvalidRequest(MemdError):
    """400: memd refused the request as malformed."""


class Unauthorized(MemdError):
    """401: a missing or unknown API key."""


class Forbidden(MemdError):
    """403: the key lacks the route's scope or app, or a browser's request."""


class NotFound(MemdError):
    """404: no such session, event, artifact, memory, lane... (or route)."""


class Conflict(MemdError):
    """409: expected_version did not match, the id exists, a turn runs."""


class TooLarge(MemdError):
    """413: the request or the answer is over memd's limits."""


class NotSupported(MemdError):
    """501: the configured store does not support the operation."""


class Unavailable(MemdError):
    """503 (or 429): a store down, busy or full, a timeout, a shutdown.
    Nothing was written; the client retried as long as it was allowed."""


class NetworkError(MemdError):
    """No answer: the connection failed or was dropped (status 0)."""


class Timeout(NetworkError):
    """No answer within the timeout (status 0, code ``timeout``)."""


_BY_CODE: Dict[str, Type[MemdError]] = {
    "invalid_request": InvalidRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "no_route": NotFound,
    "conflict": Conflict,
    "too_large": TooLarge,
    "not_supported": NotSupported,
    "unavailable": Unavailable,
    "timeout": Unavailable,
    "shutting_down": Unavailable,
}

# A status's code when the body is not memd's (an answer of the HTTP
# library or of a proxy in between).
_CODE_BY_STATUS: Dict[int, str] = {
    400: "invalid_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "too_large",
    414: "uri_too_long",
    415: "unsupported_media_type",
    429: "too_many_requests",
    431: "headers_too_large",
    500: "internal",
    501: "not_supported",
    502: "bad_gateway",
    503: "unavailable",
    504: "gateway_timeout",
}

_BY_STATUS: Dict[int, Type[MemdError]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: TooLarge,
    429: Unavailable,
    501: NotSupported,
    503: Unavailable,
}

_EXCERPT = 200  # characters of a body that is not memd's kept as the message


def error_from_answer(
    status: int, headers: Message, raw: bytes
) -> MemdError:
    """The MemdError for a non-2xx answer: memd's error body when it is
    one, else the status's code and an excerpt of the body."""
    request_id = headers.get("X-Request-Id")
    body: Optional[Dict[str, Any]] = None
    try:
        parsed = json.loads(raw.decode("utf-8")) if raw else None
    except (ValueError, UnicodeDecodeError):
        parsed = None
    err = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(err, dict) and isinstance(err.get("code"), str):
        body = parsed
        code = err["code"]
        message = str(err.get("message") or code)
        retryable = bool(err.get("retryable", False))
    else:
        code = _CODE_BY_STATUS.get(status, f"http_{status}")
        text = raw.decode("utf-8", "replace").strip()
        message = text[:_EXCERPT] if text else f"HTTP {status}"
        retryable = status in (429, 503)
    cls: Type[MemdError] = _BY_CODE.get(code) or _BY_STATUS.get(status) or MemdError
    return cls(status, code, message, retryable, request_id, body)
