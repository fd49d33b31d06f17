# SPDX-License-Identifier: MIT
"""Retries and timeouts. Against the real memd behind a proxy that loses
answers (memd performed the request, the client never heard): the
idempotent writes are retried and stored once. Against a stand-in for
memd (a local HTTP server, for what memd does not do on demand): a 503
with Retry-After, a dropped connection on a read and on a write that is
not idempotent, a stall past the timeout, a refused connection. The
client's waits between attempts go to a recorder instead of sleeping."""

from __future__ import annotations

import os
import socket
import time
import unittest
from email.utils import formatdate
from typing import Any, List, Tuple

from memd_client import Client, NetworkError, Timeout, Unavailable
from memd_client._transport import RETRY_AFTER_MAX, retry_after_seconds
from standins import LossyProxy, StandIn, fresh, memd_client, memd_url

UNAVAILABLE = {"error": {"code": "unavailable", "message": "store busy", "retryable": True}}


class LostAnswers(unittest.TestCase):
    """The real memd performs each request; the proxy drops the first
    answer of the route under test."""

    def setUp(self) -> None:
        self.direct = memd_client()
        self.app = "py"
        self.user = fresh("user")
        self.waits: List[float] = []

    def tearDown(self) -> None:
        self.direct.delete_user(self.app, self.user)

    def through(self, proxy: LossyProxy) -> Client:
        return Client(proxy.url, api_key=os.environ.get("MEMD_API_KEY"), sleep=self.waits.append)

    def test_append_events_is_stored_once(self) -> None:
        self.direct.create_session(self.app, self.user, {"id": "s"})
        with LossyProxy(memd_url(), "POST", "/events") as proxy:
            res = self.through(proxy).append_events(self.app, self.user, "s", {
                "events": [{"role": "user", "content": "only once"}], "state_delta": {"n": 1}})
            self.assertEqual(proxy.dropped, 1)
            posts = [s for s in proxy.seen if s.method == "POST"]
        self.assertEqual(len(posts), 2)
        self.assertEqual(posts[0].json(), posts[1].json())  # the same event id both times
        self.assertEqual((res["seqs"], res["replayed"]), ([1], True))
        events = self.direct.list_events(self.app, self.user, "s")["events"]
        self.assertEqual([e["content"] for e in events], [{"parts": [{"text": "only once"}]}])
        self.assertEqual(events[0]["id"], posts[0].json()["events"][0]["id"])
        self.assertEqual(self.direct.get_state(self.app, self.user, "s"), {"n": 1})

    def test_append_messages_is_stored_once(self) -> None:
        with LossyProxy(memd_url(), "POST", "/messages") as proxy:
            self.direct.replace_messages(self.app, self.user, "s", {"messages": []})
            res = self.through(proxy).append_messages(self.app, self.user, "s", {
                "messages": [{"role": "user", "content": "hello"}]})
        self.assertTrue(res["replayed"])
        got = self.direct.get_messages(self.app, self.user, "s")["messages"]
        self.assertEqual(got, [{"role": "user", "content": "hello"}])

    def test_create_session_reads_back_after_a_409(self) -> None:
        with LossyProxy(memd_url(), "POST", "/sessions") as proxy:
            made = self.through(proxy).create_session(self.app, self.user, {"title": "once"})
            self.assertEqual([s.method for s in proxy.seen], ["POST", "POST", "GET"])
        self.assertEqual(made["title"], "once")
        listed = self.direct.list_sessions(self.app, self.user)["sessions"]
        self.assertEqual([s["id"] for s in listed], [made["id"]])

    def test_create_memory_is_stored_once(self) -> None:
        with LossyProxy(memd_url(), "POST", "/memories") as proxy:
            mem = self.through(proxy).create_memory(self.app, self.user, {"text": "likes tea"})
            self.assertEqual(len(proxy.seen), 2)
        listed = [m["id"] for m in self.direct.iter_memories(self.app, self.user)]
        self.assertEqual(listed, [mem["id"]])

    def test_delete_after_a_lost_answer_is_done(self) -> None:
        self.direct.create_session(self.app, self.user, {"id": "gone"})
        with LossyProxy(memd_url(), "DELETE", "/gone") as proxy:
            self.through(proxy).delete_session(self.app, self.user, "gone")  # no NotFound
            self.assertEqual(len(proxy.seen), 2)  # the retry was a 404

    def test_a_write_without_ids_is_not_repeated(self) -> None:
        self.direct.create_session(self.app, self.user, {"id": "s"})
        with LossyProxy(memd_url(), "PATCH", "/state") as proxy:
            with self.assertRaises(NetworkError) as cm:
                self.through(proxy).patch_state(self.app, self.user, "s", {"n": 1})
            self.assertEqual(len(proxy.seen), 1)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retryable), (0, "network", False))
        self.assertTrue(e.request_id)
        # memd did it: repeating it blindly could have done it twice.
        self.assertEqual(self.direct.get_session(self.app, self.user, "s")["version"], 1)


class StandInRetries(unittest.TestCase):
    def setUp(self) -> None:
        self.waits: List[float] = []

    def client(self, stand_in: StandIn, **options: object) -> Client:
        return Client(stand_in.url, sleep=self.waits.append, **options)  # type: ignore[arg-type]

    def test_503_with_retry_after_then_success(self) -> None:
        with StandIn(("answer", 503, UNAVAILABLE, {"Retry-After": "7"}),
                     ("answer", 503, UNAVAILABLE, {"Retry-After": "1"}),
                     ("answer", 200, {"status": "ok"}, {})) as s:
            self.assertEqual(self.client(s).healthz(), {"status": "ok"})
            self.assertEqual(len(s.seen), 3)
            self.assertEqual(s.seen[0].headers["X-Request-Id"], s.seen[2].headers["X-Request-Id"])
        self.assertEqual(self.waits, [7.0, 1.0])

    def test_503_is_retried_for_every_write(self) -> None:
        with StandIn(("answer", 503, UNAVAILABLE, {"Retry-After": "2"}),
                     ("answer", 200, {"version": 4}, {})) as s:
            got = self.client(s).patch_state("a", "u", "s", {"n": 1})
            self.assertEqual(got, {"version": 4})
            self.assertEqual([r.json() for r in s.seen], [{"n": 1}, {"n": 1}])
        self.assertEqual(self.waits, [2.0])

    def test_429_and_an_http_date(self) -> None:
        later = formatdate(time.time() + 30, usegmt=True)
        with StandIn(("answer", 429, None, {"Retry-After": later}),
                     ("answer", 200, {}, {})) as s:
            self.client(s).get_state("a", "u", "s")
        self.assertEqual(len(self.waits), 1)
        self.assertTrue(25 <= self.waits[0] <= 30, self.waits)
        self.assertEqual(retry_after_seconds("86400"), RETRY_AFTER_MAX)
        self.assertIsNone(retry_after_seconds("soon"))

    def test_503_until_the_retries_are_spent(self) -> None:
        steps: List[Tuple[Any, ...]] = [("answer", 503, UNAVAILABLE, {})] * 3
        with StandIn(*steps) as s:
            with self.assertRaises(Unavailable) as cm:
                self.client(s, retries=2, retry_base=0.5, retry_max=0.75).list_jobs("a")
            self.assertEqual(len(s.seen), 3)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retryable), (503, "unavailable", True))
        self.assertEqual(e.request_id, s.seen[0].headers["X-Request-Id"])
        # No Retry-After: backoff with full jitter, capped.
        self.assertEqual(len(self.waits), 2)
        self.assertTrue(0 <= self.waits[0] <= 0.5 and 0 <= self.waits[1] <= 0.75, self.waits)

    def test_a_dropped_read_is_retried(self) -> None:
        with StandIn(("drop",), ("answer", 200, {"events": [], "next_after_seq": None}, {})) as s:
            got = self.client(s).list_events("a", "u", "s")
            self.assertEqual(got["events"], [])
            self.assertEqual(len(s.seen), 2)
        self.assertEqual(len(self.waits), 1)

    def test_a_dropped_write_is_not_retried(self) -> None:
        with StandIn(("drop",), ("answer", 201, {}, {})) as s:
            with self.assertRaises(NetworkError) as cm:
                self.client(s).put_artifact("a", "u", "s", "f", b"data")
            self.assertEqual(len(s.seen), 1)
        self.assertNotIsInstance(cm.exception, Timeout)
        self.assertEqual((cm.exception.status, cm.exception.code), (0, "network"))
        self.assertEqual(self.waits, [])

    def test_a_dropped_append_is_retried_with_the_same_ids(self) -> None:
        with StandIn(("drop",), ("answer", 200, {"seqs": [1, 2], "replayed": True}, {})) as s:
            caller_events = [{"role": "user", "content": "a"}, {"role": "user", "content": "b", "id": "mine"}]
            self.client(s).append_events("a", "u", "s", {"events": caller_events})
            self.assertEqual(len(s.seen), 2)
            first, second = s.seen[0].json(), s.seen[1].json()
        self.assertEqual(first, second)
        self.assertEqual(first["events"][1]["id"], "mine")
        self.assertEqual(len(first["events"][0]["id"]), 36)
        self.assertNotIn("id", caller_events[0])  # the caller's dicts are left as they were

    def test_an_append_without_events_is_not_retried(self) -> None:
        with StandIn(("drop",)) as s:
            with self.assertRaises(NetworkError):
                self.client(s).append_events("a", "u", "s", {"state_delta": {"n": 1}})
            self.assertEqual(len(s.seen), 1)

    def test_a_stall_hits_the_timeout(self) -> None:
        with StandIn(("stall",), ("stall",)) as s:
            started = time.monotonic()
            with self.assertRaises(Timeout) as cm:
                self.client(s, timeout=0.2, retries=1).get_session("a", "u", "s")
            self.assertEqual(len(s.seen), 2)  # a read: tried again
            self.assertGreaterEqual(time.monotonic() - started, 0.4)
        e = cm.exception
        self.assertEqual((e.status, e.code, e.retryable), (0, "timeout", True))
        self.assertIsInstance(e, NetworkError)

    def test_a_stalled_write_is_not_retried(self) -> None:
        with StandIn(("stall",)) as s:
            with self.assertRaises(Timeout) as cm:
                self.client(s, retries=3).patch_session("a", "u", "s", {"title": "x"}, timeout=0.2)
            self.assertEqual(len(s.seen), 1)
        self.assertFalse(cm.exception.retryable)

    def test_a_refused_connection_is_retried_for_any_call(self) -> None:
        with socket.socket() as probe:  # a port nothing listens on
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        client = Client(f"http://127.0.0.1:{port}", retries=2, sleep=self.waits.append)
        with self.assertRaises(NetworkError) as cm:
            client.put_artifact("a", "u", "s", "f", "x")
        self.assertEqual(len(self.waits), 2)
        self.assertTrue(cm.exception.retryable)


if __name__ == "__main__":
    unittest.main()
