# SPDX-License-Identifier: MIT
"""Round trips against a real memd: sessions, events, state, context
(format=openai), messages, artifacts, search, memories, checkpoint
writes and lanes; the iterators across page boundaries; memd's errors as
MemdError subclasses."""

from __future__ import annotations

import os
import time
import unittest
from typing import Any, Callable, Dict, List

from memd_client import Client, Conflict, Forbidden, MemdError, NotFound, Unauthorized
from standins import fresh, memd_client, memd_url

WAIT_MAX = 20.0  # seconds a test waits for memd's index to catch up, at most


def wait_for(what: str, probe: Callable[[], Any]) -> Any:
    """probe() until it returns something true, bounded by WAIT_MAX."""
    deadline = time.monotonic() + WAIT_MAX
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {WAIT_MAX} s")
        time.sleep(0.05)


class Base(unittest.TestCase):
    def setUp(self) -> None:
        self.memd = memd_client()
        self.app = "py"
        self.user = fresh("user")

    def tearDown(self) -> None:
        self.memd.delete_user(self.app, self.user)

    def counting(self, name: str) -> List[int]:
        """Counts the calls of one of self.memd's methods (pages read)."""
        calls: List[int] = []
        real = getattr(self.memd, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return real(*args, **kwargs)

        setattr(self.memd, name, wrapper)
        return calls


class Sessions(Base):
    def test_session_round_trip(self) -> None:
        m, app, user = self.memd, self.app, self.user
        made = m.create_session(app, user, {"id": "s1", "title": "Trip", "metadata": {"k": [1]},
                                            "state": {"mood": "ok"}})
        self.assertEqual((made["id"], made["title"], made["metadata"]), ("s1", "Trip", {"k": [1]}))
        got = m.get_session(app, user, "s1")
        self.assertEqual(got["version"], made["version"])
        patched = m.patch_session(app, user, "s1", {"title": "Renamed", "archived": True})
        self.assertEqual((patched["title"], patched["archived"]), ("Renamed", True))
        self.assertEqual([s["id"] for s in m.iter_sessions(app, user)], [])  # archived
        self.assertEqual([s["id"] for s in m.iter_sessions(app, user, archived=True)], ["s1"])
        auto = m.create_session(app, user)
        self.assertEqual(len(auto["id"]), 36)  # the client's UUIDv7
        self.assertEqual(auto["id"][14], "7")
        m.delete_session(app, user, "s1")
        with self.assertRaises(NotFound):
            m.get_session(app, user, "s1")

    def test_events_state_and_context(self) -> None:
        m, app, user = self.memd, self.app, self.user
        m.create_session(app, user, {"id": "s"})
        res = m.append_events(app, user, "s", {
            "events": [
                {"role": "user", "content": "What is the capital of France?", "author": "alice"},
                {"role": "assistant", "content": {"parts": [{"text": "Paris."}]}, "author": "bot"},
            ],
            "state_delta": {"city": "Paris", "user:lang": "fr"},
        })
        self.assertEqual((res["seqs"], res["replayed"]), ([1, 2], False))
        events = m.list_events(app, user, "s", include_text=True)
        self.assertEqual([e["text"] for e in events["events"]], ["What is the capital of France?", "Paris."])
        self.assertIsNone(events["next_after_seq"])
        self.assertEqual(len(events["events"][0]["id"]), 36)  # filled in by the client
        self.assertEqual(m.get_session(app, user, "s", events=1)["events"][0]["seq"], 2)

        m.patch_state(app, user, "s", {"city": None, "n": 3})
        self.assertEqual(m.get_state(app, user, "s"), {"n": 3, "user:lang": "fr"})
        history = m.get_state_history(app, user, "s", limit=10)
        self.assertTrue(history)

        ctx = m.get_context(app, user, "s", format="openai")
        self.assertEqual(ctx["format"], "openai")
        self.assertEqual(ctx["messages"], [
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "Paris."},
        ])
        native = m.get_context(app, user, "s")
        self.assertEqual([e["seq"] for e in native["events"]], [1, 2])

    def test_messages_round_trip(self) -> None:
        m, app, user = self.memd, self.app, self.user
        messages = [
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "-3 C"},
            {"role": "assistant", "content": "It is -3 C."},
        ]
        put = m.replace_messages(app, user, "chat", {"messages": messages[:1]})
        self.assertIn("version", put)
        res = m.append_messages(app, user, "chat", {"messages": messages[1:]})
        self.assertEqual(res["replayed"], False)
        got = m.get_messages(app, user, "chat")
        self.assertEqual(got["messages"], messages)
        ops = m.list_operations(app, user, "chat")
        self.assertTrue(ops)


    def test_one_round_trip_per_step(self) -> None:
        """return_="context": the append and the context right after it."""
        m, app, user = self.memd, self.app, self.user
        m.create_session(app, user, {"id": "s"})
        res = m.append_messages(app, user, "s", {"messages": [{"role": "user", "content": "Hi?"}]},
                                return_="context", format="openai")
        self.assertEqual((res["seqs"], res["replayed"]), ([1], False))
        self.assertEqual(res["context"]["messages"], [{"role": "user", "content": "Hi?"}])
        m.append_messages(app, user, "s", {"messages": [{"role": "assistant", "content": "Hello."}]})
        res = m.append_events(app, user, "s", {"events": [{"role": "user", "content": "Bye."}]},
                              return_="context", include_text=True)
        self.assertEqual([e["text"] for e in res["context"]["events"]], ["Hi?", "Hello.", "Bye."])
        self.assertNotIn("context", m.append_events(
            app, user, "s", {"events": [{"role": "assistant", "content": "Bye."}]}))
        opened = m.open_lane(app, user, "dm", return_="context")
        self.assertEqual(opened["context"]["events"], [])
        by_source = m.open_lane_by_source(
            app, {"platform": "slack", "chat_id": "c1", "user_id": user}, return_="context",
            format="openai")
        self.assertEqual(by_source["context"]["messages"], [])
        with self.assertRaises(MemdError) as cm:
            m.append_events(app, user, "s", {"events": [{"role": "user", "content": "x"}]},
                            return_="events")
        self.assertEqual(cm.exception.status, 400)


class Artifacts(Base):
    def test_artifact_bytes_in_and_out(self) -> None:
        m, app, user = self.memd, self.app, self.user
        m.create_session(app, user, {"id": "s"})
        blob = bytes(range(256)) * 3
        first = m.put_artifact(app, user, "s", "img.png", blob, content_type="image/png")
        self.assertEqual((first["version"], first["size"], first["mime_type"]), (1, 768, "image/png"))
        second = m.put_artifact(app, user, "s", "img.png", "now text, ünïcode")
        self.assertEqual(second["version"], 2)
        art = m.get_artifact(app, user, "s", "img.png", version=1)
        self.assertEqual((art.data, art.content_type, art.version), (blob, "image/png", 1))
        self.assertEqual(art.created, first["created"])
        latest = m.get_artifact(app, user, "s", "img.png")
        self.assertEqual(latest.data.decode("utf-8"), "now text, ünïcode")
        self.assertTrue(latest.content_type.startswith("text/plain"))
        self.assertEqual(latest.version, 2)
        listed = m.list_artifacts(app, user, "s")
        self.assertIn("img.png", str(listed))
        versions = m.list_artifact_versions(app, user, "s", "img.png")
        self.assertIn("versions", versions)
        m.delete_artifact(app, user, "s", "img.png")
        with self.assertRaises(NotFound) as cm:
            m.get_artifact(app, user, "s", "img.png")
        self.assertEqual(cm.exception.status, 404)


class SearchAndMemories(Base):
    def test_search_finds_an_event(self) -> None:
        m, app, user = self.memd, self.app, self.user
        m.create_session(app, user, {"id": "s"})
        m.append_events(app, user, "s", {"events": [{"role": "user", "content": "the zebra crossed"}]})
        hits = wait_for("the event searchable", lambda: m.search(
            app, user, {"query": "zebra", "sources": ["events"]})["results"])
        self.assertEqual((hits[0]["session_id"], hits[0]["seq"]), ("s", 1))

    def test_memory_round_trip(self) -> None:
        m, app, user = self.memd, self.app, self.user
        mem = m.create_memory(app, user, {"text": "prefers window seats", "topics": ["travel"]})
        self.assertEqual((mem["version"], mem["topics"]), (1, ["travel"]))
        self.assertEqual(m.get_memory(app, user, mem["id"])["text"], "prefers window seats")
        changed = m.update_memory(app, user, mem["id"], {"text": "prefers aisle seats"}, if_match=1)
        self.assertEqual(changed["version"], 2)
        with self.assertRaises(Conflict) as cm:
            m.update_memory(app, user, mem["id"], {"text": "stale"}, if_match=1)
        self.assertEqual(cm.exception.status, 409)
        history = m.get_memory_history(app, user, mem["id"])
        self.assertIn("prefers aisle seats", str(history))
        hits = wait_for("the memory searchable", lambda: m.search(
            app, user, {"query": "aisle", "sources": ["memories"]})["results"])
        self.assertEqual(hits[0]["source"], "memory")
        m.delete_memory(app, user, mem["id"], if_match=2)
        with self.assertRaises(NotFound):
            m.get_memory(app, user, mem["id"])


class Tasks(Base):
    def test_task_round_trip(self) -> None:
        m, app, user = self.memd, self.app, self.user

        def task(state: str, tid: str = "t1") -> Dict[str, Any]:
            return {"kind": "task", "id": tid, "contextId": "ctx1", "status": {"state": state},
                    "history": [{"kind": "message", "messageId": "m1", "role": "user",
                                 "parts": [{"kind": "text", "text": "hi"}]},
                                {"kind": "message", "messageId": "m2", "role": "agent",
                                 "parts": [{"kind": "text", "text": "on it"}]}]}

        made = m.put_task(app, "t1", task("submitted"), user=user, if_none_match="*")
        self.assertEqual((made["version"], made["user"]), (1, user))
        with self.assertRaises(Conflict):
            m.put_task(app, "t1", task("working"), if_none_match="*")
        self.assertEqual(m.put_task(app, "t1", task("working"), user=user, if_match=1)["version"], 2)
        with self.assertRaises(Conflict):
            m.put_task(app, "t1", task("working"), user=user, if_match=1)
        m.put_task(app, "t1", task("completed"), user=user)
        with self.assertRaises(Conflict) as cm:
            m.put_task(app, "t1", task("working"), user=user)
        self.assertIn("completed", str(cm.exception))
        got = m.get_task(app, "t1", history_length=1)
        self.assertEqual(got["task"]["status"]["state"], "completed")
        self.assertEqual([h["messageId"] for h in got["task"]["history"]], ["m2"])
        m.put_task(app, "t2", task("working", "t2"))
        self.assertEqual([r["task"]["id"] for r in m.list_tasks(app, state="completed")["tasks"]],
                         ["t1"])
        self.assertEqual([r["task"]["id"] for r in m.iter_tasks(app, limit=1)], ["t2", "t1"])
        m.delete_task(app, "t1", if_match=3)
        with self.assertRaises(NotFound):
            m.get_task(app, "t1")


class Checkpoints(Base):
    def test_writes_keep_their_task_path(self) -> None:
        m, app, user = self.memd, self.app, self.user
        m.put_checkpoint(app, user, "th", "0001", {"type": "json", "checkpoint": "e30="})
        # (task_id, task_path or None, [(idx, channel)]): the paths order
        # otherwise than the task ids; U+FF41 sorts before U+1F600 by code
        # point (as Python's str does), after it by UTF-16 code unit.
        puts = [("a", "~__pregel_pull, b", [(0, "out"), (1, "log")]),
                ("e", "~__pregel_push, 2, \uff41", [(0, "out")]),
                ("input", None, [(0, "out")]),
                ("b", "~__pregel_pull, a", [(0, "out"), (-1, "__error__")]),
                ("d", "~__pregel_push, 2, \U0001f600", [(0, "out")])]
        for task_id, task_path, writes in puts:
            body: Dict[str, Any] = {"task_id": task_id, "writes": [
                {"idx": idx, "channel": ch, "type": "json", "value": "MQ=="} for idx, ch in writes]}
            if task_path is not None:
                body["task_path"] = task_path
            self.assertIsNone(m.put_checkpoint_writes(app, user, "th", "0001", body))
        want = sorted((path or "", tid, idx) for tid, path, writes in puts for idx, _ in writes)
        self.assertNotEqual([w[1] for w in want], sorted(w[1] for w in want))
        got = m.get_checkpoint(app, user, "th", "0001")["pending_writes"]
        self.assertEqual([(w["task_path"], w["task_id"], w["idx"]) for w in got], want)


class Lanes(Base):
    def test_lane_round_trip(self) -> None:
        m, app, user = self.memd, self.app, self.user
        opened = m.open_lane(app, user, "dm")
        self.assertTrue(opened["created"])
        lane = m.get_lane(app, user, "dm")
        self.assertEqual(lane["session_id"], opened["session"]["id"])
        turn = m.begin_turn(app, user, "dm")
        with self.assertRaises(Conflict) as cm:
            m.begin_turn(app, user, "dm")
        self.assertIn("holder", cm.exception.body or {})
        m.put_inbox(app, user, "dm", {"mode": "queue", "event": {"role": "user", "content": "later"}})
        self.assertEqual(m.get_lane(app, user, "dm")["inbox_depth"], 1)
        m.heartbeat_turn(app, user, "dm", turn["turn_id"])
        m.end_turn(app, user, "dm", turn["turn_id"], {"outcome": "ok"})
        self.assertTrue(m.suspend_lane(app, user, "dm")["suspended"])
        m.delete_lane(app, user, "dm")
        with self.assertRaises(NotFound):
            m.get_lane(app, user, "dm")


class Pages(Base):
    """Each iterator with a page size smaller than what there is: every
    item exactly once, over several pages."""

    def test_iter_sessions(self) -> None:
        made = {self.memd.create_session(self.app, self.user)["id"] for _ in range(7)}
        pages = self.counting("list_sessions")
        got = [s["id"] for s in self.memd.iter_sessions(self.app, self.user, limit=3)]
        self.assertEqual(sorted(got), sorted(made))
        self.assertEqual(len(pages), 3)

    def test_iter_events(self) -> None:
        self.memd.create_session(self.app, self.user, {"id": "s"})
        self.memd.append_events(self.app, self.user, "s", {
            "events": [{"role": "user", "content": f"m{i}"} for i in range(25)]})
        pages = self.counting("list_events")
        got = [e["seq"] for e in self.memd.iter_events(self.app, self.user, "s", limit=4)]
        self.assertEqual(got, list(range(1, 26)))
        self.assertEqual(len(pages), 7)
        later = [e["seq"] for e in self.memd.iter_events(self.app, self.user, "s", after_seq=20, limit=2)]
        self.assertEqual(later, [21, 22, 23, 24, 25])

    def test_iter_lanes_and_app_lanes(self) -> None:
        app = fresh("lanes")  # its own app: list_app_lanes sees only these
        other = fresh("user")
        try:
            for key in ("a", "b", "c", "d", "e"):
                self.memd.open_lane(app, self.user, key)
            self.memd.open_lane(app, other, "z")
            pages = self.counting("list_lanes")
            got = [lane["key"] for lane in self.memd.iter_lanes(app, self.user, limit=2)]
            self.assertEqual(sorted(got), ["a", "b", "c", "d", "e"])
            self.assertEqual(len(pages), 3)
            every = [(lane["user"], lane["key"]) for lane in self.memd.iter_app_lanes(app, limit=2)]
            self.assertEqual(len(every), 6)
            self.assertEqual(set(every), {(self.user, k) for k in "abcde"} | {(other, "z")})
        finally:
            self.memd.delete_user(app, self.user)
            self.memd.delete_user(app, other)

    def test_iter_memories(self) -> None:
        made = {self.memd.create_memory(self.app, self.user, {"text": f"fact {i}"})["id"] for i in range(5)}
        pages = self.counting("list_memories")
        got = [mem["id"] for mem in self.memd.iter_memories(self.app, self.user, limit=2)]
        self.assertEqual(sorted(got), sorted(made))
        self.assertEqual(len(pages), 3)


class Errors(Base):
    def test_conflict_on_expected_version(self) -> None:
        m, app, user = self.memd, self.app, self.user
        m.create_session(app, user, {"id": "s"})
        m.append_events(app, user, "s", {"events": [{"role": "user", "content": "one"}]})
        with self.assertRaises(Conflict) as cm:
            m.append_events(app, user, "s", {"events": [{"role": "user", "content": "two"}],
                                              "expected_version": 0},
                            headers={"X-Request-Id": "py-conflict-1"})
        e = cm.exception
        self.assertIsInstance(e, MemdError)
        self.assertEqual((e.status, e.code, e.retryable), (409, "conflict", False))
        self.assertEqual(e.request_id, "py-conflict-1")
        self.assertIn("version", e.message)
        self.assertEqual(m.get_session(app, user, "s")["last_seq"], 1)  # nothing written
        with self.assertRaises(Conflict) as cm:
            m.create_session(app, user, {"id": "s"})
        self.assertTrue(cm.exception.request_id)  # memd's own id

    def test_not_found(self) -> None:
        with self.assertRaises(NotFound) as cm:
            self.memd.get_session(self.app, self.user, "absent")
        e = cm.exception
        self.assertEqual((e.status, e.code), (404, "not_found"))
        self.assertTrue(e.request_id)
        with self.assertRaises(NotFound):
            self.memd.delete_session(self.app, self.user, "absent")

    def test_keys(self) -> None:
        with self.assertRaises(Unauthorized) as cm:
            Client(memd_url(), retries=0).list_sessions(self.app, self.user)
        self.assertEqual(cm.exception.status, 401)
        read_key = os.environ.get("MEMD_READ_KEY")
        if not read_key:
            self.skipTest("MEMD_READ_KEY is not set")
        reader = Client(memd_url(), api_key=read_key)
        self.assertEqual(reader.list_sessions(self.app, self.user)["sessions"], [])
        with self.assertRaises(Forbidden) as cm2:
            reader.create_session(self.app, self.user)
        self.assertEqual((cm2.exception.status, cm2.exception.code), (403, "forbidden"))


if __name__ == "__main__":
    unittest.main()
