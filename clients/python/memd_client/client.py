# SPDX-License-Identifier: MIT
"""Client: one method per operation of memd's REST API (api/openapi.yaml),
named as its operationId in snake_case.

Path parameters come first, positional, in the order the path names
them; then the JSON request body, where the operation takes one; then,
keyword-only, the query parameters by their names in the API, and
``timeout=`` (seconds, this call's attempts) and ``headers=`` (extra
request headers). A method returns the parsed JSON answer (None for
204); a failure raises MemdError (memd_client.errors)."""

from __future__ import annotations

import json
import time
from typing import (
    Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Tuple, Union,
)

from ._ids import uuid7
from ._transport import Answer, Transport, path_of
from .errors import Conflict, NotFound

JSONObject = Dict[str, Any]
Headers = Mapping[str, str]

DEFAULT_TIMEOUT = 30.0  # seconds each attempt may wait for memd (connect, each read)
DEFAULT_RETRIES = 3  # attempts after the first
DEFAULT_RETRY_BASE = 0.2  # seconds: the first backoff's cap, doubled per attempt
DEFAULT_RETRY_MAX = 10.0  # seconds: the cap of any backoff


class Artifact(NamedTuple):
    """An artifact version as get_artifact reads it."""

    data: bytes
    content_type: str
    version: int
    created: str


def _path(fmt: str, *values: str) -> str:
    return path_of(fmt.split("{}"), *values)


def _with_ids(items: Any, what: str) -> List[Any]:
    """A copy of a list of events or messages in which every dict
    without an id has a new UUIDv7 one (the caller's list is left as it
    is), so that the write can be repeated after a lost answer."""
    if not isinstance(items, list):
        raise TypeError(f"{what} must be a list")
    out: List[Any] = []
    for item in items:
        if isinstance(item, dict) and item.get("id") is None:
            item = dict(item, id=uuid7())
        out.append(item)
    return out


def _if_match(value: Optional[Union[str, int]]) -> Optional[Dict[str, str]]:
    """The If-Match header of a version number (quoted, as memd's ETag)
    or of an ETag or * given as it is."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError("if_match must be a version number or an ETag string")
    return {"If-Match": f'"{value}"' if isinstance(value, int) else value}


def _if_none_match(value: Optional[str]) -> Optional[Dict[str, str]]:
    """The If-None-Match header: only "*" (create only)."""
    if value is None:
        return None
    if value != "*":
        raise ValueError('if_none_match must be "*"')
    return {"If-None-Match": value}


def _merge(*headers: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    out: Dict[str, str] = {}
    for h in headers:
        if h:
            out.update(h)
    return out or None


class Client:
    """A client of one memd server.

    base_url: memd's address, e.g. "http://127.0.0.1:8700".
    api_key: sent as ``Authorization: Bearer <key>`` when given.
    timeout: seconds an attempt may wait to connect and for each read
        (a call's own ``timeout=`` overrides it).
    retries: attempts after the first. A 503 or 429 (nothing was written)
        is retried for every call, after its Retry-After (at most 60 s)
        or else a backoff (full jitter: random up to
        retry_base * 2^attempt, at most retry_max seconds). A call that got
        no answer (connection dropped, timeout) is retried only when
        repeating it is safe: reads, deletes, and the writes made
        idempotent by ids the client fills in (append_events,
        append_messages, create_session, create_memory). A refused
        connection (nothing was sent) is retried for every call.
    headers: sent with every request.
    sleep: how the client waits between attempts (time.sleep).
    """

    def __init__(
        self,
        base_url: str,
        api_key: Optional[str] = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        *,
        retry_base: float = DEFAULT_RETRY_BASE,
        retry_max: float = DEFAULT_RETRY_MAX,
        headers: Optional[Headers] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._t = Transport(
            base_url, api_key, timeout, retries, retry_base, retry_max, headers, sleep
        )

    @property
    def base_url(self) -> str:
        return self._t.base_url

    def __repr__(self) -> str:
        return f"Client({self._t.base_url!r})"

    def _send(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]],
        body: Optional[JSONObject],
        *,
        safe: bool,
        timeout: Optional[float],
        headers: Optional[Headers],
        extra_headers: Optional[Headers] = None,
    ) -> Answer:
        data = None
        content_type = None
        if body is not None:
            data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            content_type = "application/json"
        return self._t.request(
            method, path, query, data, content_type,
            safe=safe, timeout=timeout, headers=headers, extra_headers=extra_headers,
        )

    def _json(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]],
        body: Optional[JSONObject],
        *,
        safe: bool,
        timeout: Optional[float],
        headers: Optional[Headers],
        extra_headers: Optional[Headers] = None,
    ) -> Any:
        return self._send(
            method, path, query, body,
            safe=safe, timeout=timeout, headers=headers, extra_headers=extra_headers,
        ).json()

    def _delete(
        self,
        path: str,
        query: Optional[Mapping[str, Any]],
        *,
        timeout: Optional[float],
        headers: Optional[Headers],
        extra_headers: Optional[Headers] = None,
    ) -> None:
        """A DELETE answered 204. A 404 on a retry after an attempt whose
        answer was lost means that attempt deleted it: done."""
        try:
            self._send(
                "DELETE", path, query, None,
                safe=True, timeout=timeout, headers=headers, extra_headers=extra_headers,
            )
        except NotFound as e:
            if not e.after_lost_answer:
                raise
        return None

    def healthz(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Liveness - the process is up and serving.

        GET /healthz
        """
        return self._json(
            "GET", _path("/healthz"),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def readyz(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Readiness - every configured store answers and takes writes.

        GET /readyz
        """
        return self._json(
            "GET", _path("/readyz"),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def openapi(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """This document, as JSON.

        GET /openapi.json
        """
        return self._json(
            "GET", _path("/openapi.json"),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def metrics(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> str:
        """Prometheus metrics (text format 0.0.4), as text.

        GET /metrics
        """
        answer = self._send(
            "GET", _path("/metrics"), None, None,
            safe=True, timeout=timeout, headers=headers, extra_headers={"Accept": "text/plain"},
        )
        return answer.body.decode("utf-8")

    def list_plugins(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The loaded plugins, their versions, ABI and instances.

        GET /v1/plugins
        """
        return self._json(
            "GET", _path("/v1/plugins"),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def delete_user(
        self,
        app: str,
        user: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Forget everything of a user in an app.

        DELETE /v1/apps/{app}/users/{user}
        """
        self._delete(
            _path("/v1/apps/{}/users/{}", app, user),
            None, timeout=timeout, headers=headers,
        )

    def create_session(
        self,
        app: str,
        user: str,
        body: Optional[JSONObject] = None,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Create a session. Without an id in the body the client makes one
        (a UUIDv7), so the call can be repeated after a lost answer: a 409
        on such a retry means the lost attempt created it, and the session
        is read back.

        POST /v1/apps/{app}/users/{user}/sessions
        """
        body = dict(body or {})
        if body.get("id") is None:
            body["id"] = uuid7()
        try:
            return self._json(
                "POST", _path("/v1/apps/{}/users/{}/sessions", app, user),
                None, body, safe=True, timeout=timeout, headers=headers,
            )
        except Conflict as e:
            if not e.after_lost_answer:
                raise
        return self.get_session(app, user, body["id"], timeout=timeout, headers=headers)

    def list_sessions(
        self,
        app: str,
        user: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        archived: Optional[bool] = None,
        origin_platform: Optional[str] = None,
        lane: Optional[str] = None,
        order: Optional[str] = None,
        active_within: Optional[int] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """List sessions, newest first, a page at a time.

        GET /v1/apps/{app}/users/{user}/sessions
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions", app, user),
            {
                "limit": limit,
                "cursor": cursor,
                "archived": archived,
                "origin_platform": origin_platform,
                "lane": lane,
                "order": order,
                "active_within": active_within,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def get_session(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        events: Optional[int] = None,
        after_seq: Optional[int] = None,
        after_time: Optional[str] = None,
        include_text: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """A session, optionally with its events.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}", app, user, sid),
            {
                "events": events,
                "after_seq": after_seq,
                "after_time": after_time,
                "include_text": include_text,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def patch_session(
        self,
        app: str,
        user: str,
        sid: str,
        body: Optional[JSONObject] = None,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Change a session's title, metadata or archived flag.

        PATCH /v1/apps/{app}/users/{user}/sessions/{sid}
        """
        return self._json(
            "PATCH", _path("/v1/apps/{}/users/{}/sessions/{}", app, user, sid),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def delete_session(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Delete a session with its events, state, artifacts and temp state.

        DELETE /v1/apps/{app}/users/{user}/sessions/{sid}
        """
        self._delete(
            _path("/v1/apps/{}/users/{}/sessions/{}", app, user, sid),
            None, timeout=timeout, headers=headers,
        )

    def append_events(
        self,
        app: str,
        user: str,
        sid: str,
        body: JSONObject,
        *,
        return_: Optional[str] = None,
        format: Optional[str] = None,
        include_text: Optional[bool] = None,
        query: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Append events and a state delta in one atomic transaction.

        POST /v1/apps/{app}/users/{user}/sessions/{sid}/events
        Every event without an id gets a UUIDv7 first, so the call can be
        repeated after a lost answer: memd answers a repeat with
        ``"replayed": true`` and writes nothing. (Without events the call is
        not repeated after a lost answer.)

        With ``return_="context"`` the answer also holds ``"context"``, the
        session's context right after this write (``format``,
        ``include_text`` and ``query`` as ``get_context`` takes them), or
        ``"context_error"`` when the write is done but the read failed:
        one round trip per agent step.

        """
        body = dict(body)
        if body.get("events"):
            body["events"] = _with_ids(body["events"], "events")
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/sessions/{}/events", app, user, sid),
            {
                "return": return_,
                "format": format,
                "include_text": include_text,
                "query": query,
            },
            body, safe=bool(body.get("events")), timeout=timeout, headers=headers,
        )

    def list_events(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        after_seq: Optional[int] = None,
        limit: Optional[int] = None,
        include_text: Optional[bool] = None,
        roles: Optional[str] = None,
        include_hidden: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Events in seq order, a page at a time.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/events
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/events", app, user, sid),
            {
                "after_seq": after_seq,
                "limit": limit,
                "include_text": include_text,
                "roles": roles,
                "include_hidden": include_hidden,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def clear_events(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        expected_version: Optional[int] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Hide every event (a chat UI's clear), keeping the session, its state and artifacts.

        DELETE /v1/apps/{app}/users/{user}/sessions/{sid}/events
        """
        return self._json(
            "DELETE", _path("/v1/apps/{}/users/{}/sessions/{}/events", app, user, sid),
            {
                "expected_version": expected_version,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def get_context(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        include_text: Optional[bool] = None,
        format: Optional[str] = None,
        query: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The working memory the app's strategy selects for the next LLM call.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/context
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/context", app, user, sid),
            {
                "include_text": include_text,
                "format": format,
                "query": query,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def get_state(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The merged state of a session.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/state
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/state", app, user, sid),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def patch_state(
        self,
        app: str,
        user: str,
        sid: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Apply a state delta (null deletes a key) atomically.

        PATCH /v1/apps/{app}/users/{user}/sessions/{sid}/state
        """
        return self._json(
            "PATCH", _path("/v1/apps/{}/users/{}/sessions/{}/state", app, user, sid),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def rewind_session(
        self,
        app: str,
        user: str,
        sid: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Back up n user turns (a chat UI's undo or retry).

        POST /v1/apps/{app}/users/{user}/sessions/{sid}:rewind
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/sessions/{}:rewind", app, user, sid),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def get_messages(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        format: Optional[str] = None,
        roles: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The visible transcript as OpenAI chat-completions messages.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/messages
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/messages", app, user, sid),
            {"format": format, "roles": roles}, None, safe=True, timeout=timeout, headers=headers,
        )

    def append_messages(
        self,
        app: str,
        user: str,
        sid: str,
        body: JSONObject,
        *,
        return_: Optional[str] = None,
        format: Optional[str] = None,
        include_text: Optional[bool] = None,
        query: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Append OpenAI chat-completions messages (as events, in one atomic append).

        POST /v1/apps/{app}/users/{user}/sessions/{sid}/messages
        Every message without an id gets a UUIDv7 first, so the call can be
        repeated after a lost answer: memd answers a repeat with
        ``"replayed": true`` and writes nothing. (Without messages the call is
        not repeated after a lost answer.)

        With ``return_="context"`` the answer also holds ``"context"``, the
        session's context right after this write (``format``,
        ``include_text`` and ``query`` as ``get_context`` takes them), or
        ``"context_error"`` when the write is done but the read failed:
        one round trip per agent step.

        """
        body = dict(body)
        if body.get("messages"):
            body["messages"] = _with_ids(body["messages"], "messages")
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/sessions/{}/messages", app, user, sid),
            {
                "return": return_,
                "format": format,
                "include_text": include_text,
                "query": query,
            },
            body, safe=bool(body.get("messages")), timeout=timeout, headers=headers,
        )

    def replace_messages(
        self,
        app: str,
        user: str,
        sid: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Replace the whole transcript atomically (a chat UI's retry, edit or compress).

        PUT /v1/apps/{app}/users/{user}/sessions/{sid}/messages
        """
        return self._json(
            "PUT", _path("/v1/apps/{}/users/{}/sessions/{}/messages", app, user, sid),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def list_operations(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The session's rewinds, rewrites, clears and undos, newest first.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/operations
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/operations", app, user, sid),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def undo_operation(
        self,
        app: str,
        user: str,
        sid: str,
        op: str,
        body: Optional[JSONObject] = None,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Reverse a rewind, rewrite or clear.

        POST /v1/apps/{app}/users/{user}/sessions/{sid}/operations/{op}:undo
        """
        return self._json(
            "POST",
            _path("/v1/apps/{}/users/{}/sessions/{}/operations/{}:undo",
                  app, user, sid, op),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def get_state_history(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        cursor: Optional[str] = None,
        limit: Optional[int] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The session's state changes, oldest first, a page at a time.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/state/history
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/state/history", app, user, sid),
            {"cursor": cursor, "limit": limit}, None, safe=True, timeout=timeout, headers=headers,
        )

    def end_invocation(
        self,
        app: str,
        user: str,
        sid: str,
        invocation: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """End an invocation - drop the temp state written under it.

        POST /v1/apps/{app}/users/{user}/sessions/{sid}/invocations/{invocation}:end
        """
        return self._json(
            "POST",
            _path("/v1/apps/{}/users/{}/sessions/{}/invocations/{}:end",
                  app, user, sid, invocation),
            None, None, safe=False, timeout=timeout, headers=headers,
        )

    def list_artifacts(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The latest version of every artifact of a session.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/artifacts", app, user, sid),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def put_artifact(
        self,
        app: str,
        user: str,
        sid: str,
        name: str,
        data: Union[bytes, bytearray, memoryview, str],
        *,
        content_type: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Store data as a new version of the artifact: bytes as they are
        (content_type default application/octet-stream), a str as UTF-8
        (default text/plain; charset=utf-8). Returns the Artifact JSON.

        PUT /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}
        """
        if isinstance(data, str):
            raw = data.encode("utf-8")
            default_type = "text/plain; charset=utf-8"
        elif isinstance(data, (bytes, bytearray, memoryview)):
            raw = bytes(data)
            default_type = "application/octet-stream"
        else:
            raise TypeError(f"artifact data must be bytes or str, not {type(data).__name__}")
        return self._t.request(
            "PUT", _path("/v1/apps/{}/users/{}/sessions/{}/artifacts/{}", app, user, sid, name),
            None, raw, content_type or default_type,
            safe=False, timeout=timeout, headers=headers,
        ).json()

    def get_artifact(
        self,
        app: str,
        user: str,
        sid: str,
        name: str,
        *,
        version: Optional[int] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Artifact:
        """The bytes of the latest version, or of version=N, with their
        media type, version and creation time.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}
        """
        answer = self._send(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/artifacts/{}", app, user, sid, name),
            {"version": version}, None,
            safe=True, timeout=timeout, headers=headers, extra_headers={"Accept": "*/*"},
        )
        return Artifact(
            data=answer.body,
            content_type=answer.headers.get("Content-Type") or "application/octet-stream",
            version=int(answer.headers.get("X-Memd-Artifact-Version") or 0),
            created=answer.headers.get("X-Memd-Artifact-Created") or "",
        )

    def delete_artifact(
        self,
        app: str,
        user: str,
        sid: str,
        name: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Delete every version of the artifact.

        DELETE /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}
        """
        self._delete(
            _path("/v1/apps/{}/users/{}/sessions/{}/artifacts/{}", app, user, sid, name),
            None, timeout=timeout, headers=headers,
        )

    def list_artifact_versions(
        self,
        app: str,
        user: str,
        sid: str,
        name: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Every version of an artifact, ascending.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/artifacts/{name}/versions
        """
        return self._json(
            "GET",
            _path("/v1/apps/{}/users/{}/sessions/{}/artifacts/{}/versions",
                  app, user, sid, name),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def search(
        self,
        app: str,
        user: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Search the user's events and long-term memories by keyword (BM25F),
        vector similarity or both.

        POST /v1/apps/{app}/users/{user}/search
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/search", app, user),
            None, body, safe=True, timeout=timeout, headers=headers,
        )

    def rebuild_index(
        self,
        app: str,
        user: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Start rebuilding the user's search index entries from their
        sessions, as a background job.

        POST /v1/apps/{app}/users/{user}/index:rebuild
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/index:rebuild", app, user),
            None, None, safe=False, timeout=timeout, headers=headers,
        )

    def create_memory(
        self,
        app: str,
        user: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Create a long-term memory of the user. Without an id in the body
        the client makes one (a UUIDv7), so the call can be repeated after a
        lost answer (memd answers a repeat with the stored memory).

        POST /v1/apps/{app}/users/{user}/memories
        """
        body = dict(body)
        if body.get("id") is None:
            body["id"] = uuid7()
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/memories", app, user),
            None, body, safe=True, timeout=timeout, headers=headers,
        )

    def list_memories(
        self,
        app: str,
        user: str,
        *,
        kind: Optional[str] = None,
        topic: Optional[str] = None,
        entity: Optional[str] = None,
        session_id: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """List the user's memories, newest created first, a page at a time.

        GET /v1/apps/{app}/users/{user}/memories
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/memories", app, user),
            {
                "kind": kind,
                "topic": topic,
                "entity": entity,
                "session_id": session_id,
                "limit": limit,
                "cursor": cursor,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def get_memory(
        self,
        app: str,
        user: str,
        mid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """One memory (404 once it has expired or was deleted).

        GET /v1/apps/{app}/users/{user}/memories/{mid}
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/memories/{}", app, user, mid),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def update_memory(
        self,
        app: str,
        user: str,
        mid: str,
        body: JSONObject,
        *,
        if_match: Optional[Union[str, int]] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Change a memory's text, kind, topics, entities or expiry; with
        if_match= (a version number or the ETag) only that version.

        PATCH /v1/apps/{app}/users/{user}/memories/{mid}
        """
        return self._json(
            "PATCH", _path("/v1/apps/{}/users/{}/memories/{}", app, user, mid),
            None, body, safe=False, timeout=timeout, headers=headers,
            extra_headers=_if_match(if_match),
        )

    def delete_memory(
        self,
        app: str,
        user: str,
        mid: str,
        *,
        version: Optional[int] = None,
        if_match: Optional[Union[str, int]] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Delete a memory (its history stays readable); with version= or
        if_match= (a version number or the ETag) only that version.

        DELETE /v1/apps/{app}/users/{user}/memories/{mid}
        """
        self._delete(
            _path("/v1/apps/{}/users/{}/memories/{}", app, user, mid), {"version": version},
            timeout=timeout, headers=headers, extra_headers=_if_match(if_match),
        )

    def get_memory_history(
        self,
        app: str,
        user: str,
        mid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Every change of a memory, oldest first (also after it was deleted).

        GET /v1/apps/{app}/users/{user}/memories/{mid}/history
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/memories/{}/history", app, user, mid),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def list_tasks(
        self,
        app: str,
        *,
        context_id: Optional[str] = None,
        state: Optional[str] = None,
        user: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """List the app's A2A tasks, most recently saved first, a page at a time.

        GET /v1/apps/{app}/tasks
        """
        return self._json(
            "GET", _path("/v1/apps/{}/tasks", app),
            {
                "context_id": context_id,
                "state": state,
                "user": user,
                "limit": limit,
                "cursor": cursor,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def put_task(
        self,
        app: str,
        tid: str,
        body: JSONObject,
        *,
        user: Optional[str] = None,
        if_match: Optional[Union[str, int]] = None,
        if_none_match: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Save an A2A task (create it or replace it whole); with if_match=
        (a version number or the ETag) only over that version, with
        if_none_match="*" only if it does not exist. An unconditional save
        is repeated after a lost answer (it saves the same task again).

        PUT /v1/apps/{app}/tasks/{tid}
        """
        return self._json(
            "PUT", _path("/v1/apps/{}/tasks/{}", app, tid),
            {"user": user}, body, safe=if_match is None and if_none_match is None,
            timeout=timeout, headers=headers,
            extra_headers=_merge(_if_match(if_match), _if_none_match(if_none_match)),
        )

    def get_task(
        self,
        app: str,
        tid: str,
        *,
        history_length: Optional[int] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """One A2A task (history_length=: only its most recent history messages).

        GET /v1/apps/{app}/tasks/{tid}
        """
        return self._json(
            "GET", _path("/v1/apps/{}/tasks/{}", app, tid),
            {"history_length": history_length}, None, safe=True, timeout=timeout,
            headers=headers,
        )

    def delete_task(
        self,
        app: str,
        tid: str,
        *,
        if_match: Optional[Union[str, int]] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Delete an A2A task; with if_match= (a version number or the
        ETag) only that version.

        DELETE /v1/apps/{app}/tasks/{tid}
        """
        self._delete(
            _path("/v1/apps/{}/tasks/{}", app, tid), None,
            timeout=timeout, headers=headers, extra_headers=_if_match(if_match),
        )

    def list_jobs(
        self,
        app: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The app's background jobs, newest first.

        GET /v1/apps/{app}/jobs
        """
        return self._json(
            "GET", _path("/v1/apps/{}/jobs", app),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def get_job(
        self,
        app: str,
        job: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """One background job of the app - state, progress, error.

        GET /v1/apps/{app}/jobs/{job}
        """
        return self._json(
            "GET", _path("/v1/apps/{}/jobs/{}", app, job),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def cancel_job(
        self,
        app: str,
        job: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Cancel a background job of the app.

        DELETE /v1/apps/{app}/jobs/{job}
        """
        return self._json(
            "DELETE", _path("/v1/apps/{}/jobs/{}", app, job),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def resolve_lane(
        self,
        app: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Derive the lane key and user scope of a message source.

        POST /v1/apps/{app}/lanes:resolve
        """
        return self._json(
            "POST", _path("/v1/apps/{}/lanes:resolve", app),
            None, body, safe=True, timeout=timeout, headers=headers,
        )

    def open_lane_by_source(
        self,
        app: str,
        body: JSONObject,
        *,
        return_: Optional[str] = None,
        format: Optional[str] = None,
        include_text: Optional[bool] = None,
        query: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Resolve a message source and open its lane, in one call.

        POST /v1/apps/{app}/lanes:open

        With ``return_="context"`` the answer also holds ``"context"``, the
        session's context right after this write (``format``,
        ``include_text`` and ``query`` as ``get_context`` takes them), or
        ``"context_error"`` when the write is done but the read failed:
        one round trip per agent step.
        """
        return self._json(
            "POST", _path("/v1/apps/{}/lanes:open", app),
            {
                "return": return_,
                "format": format,
                "include_text": include_text,
                "query": query,
            },
            body, safe=False, timeout=timeout, headers=headers,
        )

    def list_app_lanes(
        self,
        app: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        suspended: Optional[bool] = None,
        resume_pending: Optional[bool] = None,
        active_within: Optional[int] = None,
        in_turn: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The app's lanes of every user, newest activity first.

        GET /v1/apps/{app}/lanes
        """
        return self._json(
            "GET", _path("/v1/apps/{}/lanes", app),
            {
                "limit": limit,
                "cursor": cursor,
                "suspended": suspended,
                "resume_pending": resume_pending,
                "active_within": active_within,
                "in_turn": in_turn,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def list_lanes(
        self,
        app: str,
        user: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        suspended: Optional[bool] = None,
        resume_pending: Optional[bool] = None,
        active_within: Optional[int] = None,
        in_turn: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """A user's lanes, newest activity first.

        GET /v1/apps/{app}/users/{user}/lanes
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/lanes", app, user),
            {
                "limit": limit,
                "cursor": cursor,
                "suspended": suspended,
                "resume_pending": resume_pending,
                "active_within": active_within,
                "in_turn": in_turn,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def get_lane(
        self,
        app: str,
        user: str,
        key: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """A lane - its session, turn, inbox depth, recovery state and usage.

        GET /v1/apps/{app}/users/{user}/lanes/{key}
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/lanes/{}", app, user, key),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def delete_lane(
        self,
        app: str,
        user: str,
        key: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Forget a lane and its inbox (its sessions stay).

        DELETE /v1/apps/{app}/users/{user}/lanes/{key}
        """
        self._delete(
            _path("/v1/apps/{}/users/{}/lanes/{}", app, user, key),
            None, timeout=timeout, headers=headers,
        )

    def open_lane(
        self,
        app: str,
        user: str,
        key: str,
        body: Optional[JSONObject] = None,
        *,
        return_: Optional[str] = None,
        format: Optional[str] = None,
        include_text: Optional[bool] = None,
        query: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Get-or-create - the lane and its current session.

        POST /v1/apps/{app}/users/{user}/lanes/{key}:open

        With ``return_="context"`` the answer also holds ``"context"``, the
        session's context right after this write (``format``,
        ``include_text`` and ``query`` as ``get_context`` takes them), or
        ``"context_error"`` when the write is done but the read failed:
        one round trip per agent step.
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}:open", app, user, key),
            {
                "return": return_,
                "format": format,
                "include_text": include_text,
                "query": query,
            },
            body, safe=False, timeout=timeout, headers=headers,
        )

    def reset_lane(
        self,
        app: str,
        user: str,
        key: str,
        body: Optional[JSONObject] = None,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Start the lane afresh (a user's /new).

        POST /v1/apps/{app}/users/{user}/lanes/{key}:reset
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}:reset", app, user, key),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def switch_lane(
        self,
        app: str,
        user: str,
        key: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Point the lane at another session of the same user (a user's /resume).

        POST /v1/apps/{app}/users/{user}/lanes/{key}:switch
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}:switch", app, user, key),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def suspend_lane(
        self,
        app: str,
        user: str,
        key: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Suspend the lane (a user's /stop).

        POST /v1/apps/{app}/users/{user}/lanes/{key}:suspend
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}:suspend", app, user, key),
            None, None, safe=False, timeout=timeout, headers=headers,
        )

    def begin_turn(
        self,
        app: str,
        user: str,
        key: str,
        body: Optional[JSONObject] = None,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Begin a turn - one at a time per lane, under a lease.

        POST /v1/apps/{app}/users/{user}/lanes/{key}/turns
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}/turns", app, user, key),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def heartbeat_turn(
        self,
        app: str,
        user: str,
        key: str,
        turn: str,
        body: Optional[JSONObject] = None,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Extend a turn's lease.

        POST /v1/apps/{app}/users/{user}/lanes/{key}/turns/{turn}:heartbeat
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}/turns/{}:heartbeat", app, user, key, turn),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def end_turn(
        self,
        app: str,
        user: str,
        key: str,
        turn: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """End a turn with its outcome and usage.

        POST /v1/apps/{app}/users/{user}/lanes/{key}/turns/{turn}:end
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}/turns/{}:end", app, user, key, turn),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def put_inbox(
        self,
        app: str,
        user: str,
        key: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Keep a message that arrived during a turn, durably.

        POST /v1/apps/{app}/users/{user}/lanes/{key}/inbox
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}/inbox", app, user, key),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def list_inbox(
        self,
        app: str,
        user: str,
        key: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The lane's inbox - the slot first, then the FIFO in order.

        GET /v1/apps/{app}/users/{user}/lanes/{key}/inbox
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/lanes/{}/inbox", app, user, key),
            None, None, safe=True, timeout=timeout, headers=headers,
        )

    def take_inbox(
        self,
        app: str,
        user: str,
        key: str,
        body: JSONObject,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The turn holder takes the next inbox item.

        POST /v1/apps/{app}/users/{user}/lanes/{key}/inbox:take
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/lanes/{}/inbox:take", app, user, key),
            None, body, safe=False, timeout=timeout, headers=headers,
        )

    def sweep_lanes(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Run one pass of the lane watcher now.

        POST /v1/lanes:sweep
        """
        return self._json(
            "POST", _path("/v1/lanes:sweep"),
            None, None, safe=False, timeout=timeout, headers=headers,
        )

    def extract_memories(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Extract long-term memories from the session's unread events now.

        POST /v1/apps/{app}/users/{user}/sessions/{sid}/memories:extract
        """
        return self._json(
            "POST", _path("/v1/apps/{}/users/{}/sessions/{}/memories:extract", app, user, sid),
            None, None, safe=False, timeout=timeout, headers=headers,
        )

    def sweep_memories(
        self,
        *,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Run one pass of the memory worker now.

        POST /v1/memories:sweep
        """
        return self._json(
            "POST", _path("/v1/memories:sweep"),
            None, None, safe=False, timeout=timeout, headers=headers,
        )

    def put_checkpoint(
        self,
        app: str,
        user: str,
        sid: str,
        cid: str,
        body: JSONObject,
        *,
        checkpoint_ns: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """Store a checkpoint of a run (the session is its thread, created
        with its first checkpoint); body: {"type", "checkpoint" (base64),
        "parent_checkpoint_id"?, "metadata"?, "run_state"?}. A replace keeps
        the checkpoint's created time and pending writes, so a repeat is
        harmless.

        PUT /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}
        """
        return self._json(
            "PUT",
            _path("/v1/apps/{}/users/{}/sessions/{}/checkpoints/{}", app, user, sid, cid),
            {"checkpoint_ns": checkpoint_ns}, body, safe=True, timeout=timeout, headers=headers,
        )

    def get_checkpoint(
        self,
        app: str,
        user: str,
        sid: str,
        cid: str,
        *,
        checkpoint_ns: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """One checkpoint with its payload and pending writes.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}
        """
        return self._json(
            "GET",
            _path("/v1/apps/{}/users/{}/sessions/{}/checkpoints/{}", app, user, sid, cid),
            {"checkpoint_ns": checkpoint_ns}, None, safe=True, timeout=timeout, headers=headers,
        )

    def put_checkpoint_writes(
        self,
        app: str,
        user: str,
        sid: str,
        cid: str,
        body: JSONObject,
        *,
        checkpoint_ns: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Add pending writes of a task to a checkpoint, all or none; body:
        {"task_id", "task_path"?, "writes": [{"idx", "channel", "type",
        "value" (base64), "replace"?}], "run_state"?}. A repeat stores
        nothing new. A checkpoint's pending writes are read back ordered by
        (task_path, task_id, idx), strings by code point ("" = no path,
        first).

        POST /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints/{cid}/writes
        """
        self._send(
            "POST",
            _path("/v1/apps/{}/users/{}/sessions/{}/checkpoints/{}/writes", app, user, sid, cid),
            {"checkpoint_ns": checkpoint_ns}, body, safe=True, timeout=timeout, headers=headers,
        )
        return None

    def get_latest_checkpoint(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        checkpoint_ns: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The newest (greatest id) unexpired checkpoint of the session's
        namespace.

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints:latest
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/checkpoints:latest", app, user, sid),
            {"checkpoint_ns": checkpoint_ns}, None, safe=True, timeout=timeout, headers=headers,
        )

    def list_session_checkpoints(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        checkpoint_ns: Optional[str] = None,
        before: Optional[str] = None,
        metadata: Optional[str] = None,
        full: Optional[bool] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The session's checkpoints, newest first, a page at a time
        (metadata: a JSON object's text, e.g. json.dumps({"source": "loop"})).

        GET /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/sessions/{}/checkpoints", app, user, sid),
            {
                "checkpoint_ns": checkpoint_ns,
                "before": before,
                "metadata": metadata,
                "full": full,
                "limit": limit,
                "cursor": cursor,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def delete_checkpoints(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        checkpoint_ns: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> None:
        """Delete the session's checkpoints and their pending writes (of
        checkpoint_ns only when given).

        DELETE /v1/apps/{app}/users/{user}/sessions/{sid}/checkpoints
        """
        self._delete(
            _path("/v1/apps/{}/users/{}/sessions/{}/checkpoints", app, user, sid),
            {"checkpoint_ns": checkpoint_ns}, timeout=timeout, headers=headers,
        )

    def list_checkpoints(
        self,
        app: str,
        user: str,
        *,
        session_id: Optional[str] = None,
        checkpoint_ns: Optional[str] = None,
        before: Optional[str] = None,
        metadata: Optional[str] = None,
        full: Optional[bool] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The user's checkpoints across sessions, newest first, a page at
        a time.

        GET /v1/apps/{app}/users/{user}/checkpoints
        """
        return self._json(
            "GET", _path("/v1/apps/{}/users/{}/checkpoints", app, user),
            {
                "session_id": session_id,
                "checkpoint_ns": checkpoint_ns,
                "before": before,
                "metadata": metadata,
                "full": full,
                "limit": limit,
                "cursor": cursor,
            },
            None, safe=True, timeout=timeout, headers=headers,
        )

    def list_resumable_runs(
        self,
        app: str,
        *,
        resume: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Any:
        """The app's runs a restarting runtime should resume (resume:
        "automatic" or "approval"; both when None).

        GET /v1/apps/{app}/checkpoints:resumable
        """
        return self._json(
            "GET", _path("/v1/apps/{}/checkpoints:resumable", app),
            {"resume": resume, "limit": limit, "cursor": cursor},
            None, safe=True, timeout=timeout, headers=headers,
        )

    # Iterators: every item of a listing, page after page, following the
    # cursors memd hands out (next_cursor, or next_after_seq for events).

    def _pages(
        self,
        list_page: Callable[..., Any],
        args: Tuple[str, ...],
        items: str,
        query: Dict[str, Any],
        follow: str,
        given: str,
    ) -> Iterator[JSONObject]:
        while True:
            page = list_page(*args, **query)
            yield from page[items]
            after = page.get(follow)
            if after is None:
                return
            query[given] = after

    def iter_sessions(
        self,
        app: str,
        user: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        archived: Optional[bool] = None,
        origin_platform: Optional[str] = None,
        lane: Optional[str] = None,
        order: Optional[str] = None,
        active_within: Optional[int] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Iterator[JSONObject]:
        """Every session of list_sessions, page after page (limit: the page
        size; cursor: where to start)."""
        query = dict(
            limit=limit, cursor=cursor, archived=archived, origin_platform=origin_platform,
            lane=lane, order=order, active_within=active_within, timeout=timeout, headers=headers,
        )
        return self._pages(
            self.list_sessions, (app, user), "sessions", query, "next_cursor", "cursor"
        )

    def iter_events(
        self,
        app: str,
        user: str,
        sid: str,
        *,
        after_seq: Optional[int] = None,
        limit: Optional[int] = None,
        include_text: Optional[bool] = None,
        roles: Optional[str] = None,
        include_hidden: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Iterator[JSONObject]:
        """Every event of list_events in seq order, page after page
        (after_seq: where to start)."""
        query = dict(
            after_seq=after_seq, limit=limit, include_text=include_text, roles=roles,
            include_hidden=include_hidden, timeout=timeout, headers=headers,
        )
        return self._pages(
            self.list_events, (app, user, sid), "events", query, "next_after_seq", "after_seq"
        )

    def iter_lanes(
        self,
        app: str,
        user: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        suspended: Optional[bool] = None,
        resume_pending: Optional[bool] = None,
        active_within: Optional[int] = None,
        in_turn: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Iterator[JSONObject]:
        """Every lane of a user (list_lanes), page after page."""
        query = dict(
            limit=limit, cursor=cursor, suspended=suspended, resume_pending=resume_pending,
            active_within=active_within, in_turn=in_turn, timeout=timeout, headers=headers,
        )
        return self._pages(self.list_lanes, (app, user), "lanes", query, "next_cursor", "cursor")

    def iter_app_lanes(
        self,
        app: str,
        *,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        suspended: Optional[bool] = None,
        resume_pending: Optional[bool] = None,
        active_within: Optional[int] = None,
        in_turn: Optional[bool] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Iterator[JSONObject]:
        """Every lane of an app, of every user (list_app_lanes), page after
        page."""
        query = dict(
            limit=limit, cursor=cursor, suspended=suspended, resume_pending=resume_pending,
            active_within=active_within, in_turn=in_turn, timeout=timeout, headers=headers,
        )
        return self._pages(self.list_app_lanes, (app,), "lanes", query, "next_cursor", "cursor")

    def iter_tasks(
        self,
        app: str,
        *,
        context_id: Optional[str] = None,
        state: Optional[str] = None,
        user: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Iterator[JSONObject]:
        """Every task of list_tasks, page after page."""
        query = dict(
            context_id=context_id, state=state, user=user, limit=limit, cursor=cursor,
            timeout=timeout, headers=headers,
        )
        return self._pages(self.list_tasks, (app,), "tasks", query, "next_cursor", "cursor")

    def iter_memories(
        self,
        app: str,
        user: str,
        *,
        kind: Optional[str] = None,
        topic: Optional[str] = None,
        entity: Optional[str] = None,
        session_id: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
        timeout: Optional[float] = None,
        headers: Optional[Headers] = None,
    ) -> Iterator[JSONObject]:
        """Every memory of list_memories, page after page."""
        query = dict(
            kind=kind, topic=topic, entity=entity, session_id=session_id, limit=limit,
            cursor=cursor, timeout=timeout, headers=headers,
        )
        return self._pages(
            self.list_memories, (app, user), "memories", query, "next_cursor", "cursor"
        )
