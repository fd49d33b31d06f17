#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A local stand-in for an OpenAI-compatible chat completions server with
structured output, for memory extraction tests only (no LLM can run
here). It follows the published contract of POST /v1/chat/completions:
a JSON body {"model", "messages": [{"role", "content"}], "response_format":
{"type": "json_schema", "json_schema": {"name", "strict", "schema"}}, ...}
answered by {"id", "object": "chat.completion", "created", "model",
"choices": [{"index", "message": {"role": "assistant", "content": <JSON
text>}, "finish_reason"}], "usage"}; errors as {"error": {"message",
"type"}} with an HTTP status.

  openai_chat_standin.py --script FILE

Every request is checked against the contract memd's extractor must
follow (a model, messages of a system and a user message with string
contents, response_format json_schema with a name, strict true and an
object schema); a request that breaks it is answered 400 and counted in
"violations".

The answers are scripted. FILE is a JSON list of rules {"match": regex,
"text", "kind", "topics", "entities"}: an extraction call (schema name
"memory_facts") answers, for every transcript line "[seq] user ...: text"
and every rule whose regex matches the text, a fact with the rule's
fields (text may use \\1 for the regex's groups) and that seq. A
consolidation call (schema name "memory_decisions") decides per
candidate, deterministically: a text starting "FORGET " deletes the
existing memory sharing a topic with it; else a memory sharing a topic is
"none" when its text is the same and "update" when it differs; else
"add".

The model name picks the behaviour:
  scripted  as above
  hold      as scripted, but a consolidation call waits until the test
            sends POST /release (at most HOLD_MAX_SECONDS)
  holdall   as hold, for every call
  error500  always 500
  garbage   200 whose message content is not JSON
  badschema 200 whose content is JSON that breaks the schema
  badid     as scripted, but every consolidation decision names a
            memory_id that was not shown
  flaky429  429 with Retry-After: 0 on every odd request, else as scripted
GET /stats answers {"<model>": requests, "memory_facts": n,
"memory_decisions": n, "holding": held calls not answered yet,
"violations": n, "problems": [str], "system": {schema name: the last
system prompt}, "authorization": the last Authorization header or null}.

Prints "PORT n" (127.0.0.1, a port the OS chose) first, then serves
until killed.
"""
import argparse
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from standin_http import JsonHandler, serve  # noqa: E402

HOLD_MAX_SECONDS = 60.0
LINE = re.compile(r"^\[(\d+)\] (\w+)(?: \([^)]*\))?: (.*)$")


class State:
    def __init__(self, rules):
        self.rules = rules
        self.lock = threading.Lock()
        self.counts = {}
        self.holding = 0
        self.released = threading.Event()
        self.violations = 0
        self.problems = []
        self.system = {}
        self.authorization = None


def contract_problem(req):
    """What in req breaks the contract, or None."""
    if not isinstance(req, dict) or not isinstance(req.get("model"), str) or not req["model"]:
        return "no model"
    msgs = req.get("messages")
    if not isinstance(msgs, list) or len(msgs) != 2:
        return "messages must be [system, user]"
    for m, role in zip(msgs, ("system", "user")):
        if not isinstance(m, dict) or m.get("role") != role or \
                not isinstance(m.get("content"), str) or not m["content"]:
            return "message %r is not {role: %s, content: non-empty str}" % (m, role)
    rf = req.get("response_format")
    if not isinstance(rf, dict) or rf.get("type") != "json_schema":
        return "response_format is not json_schema"
    js = rf.get("json_schema")
    if not isinstance(js, dict) or not isinstance(js.get("name"), str) or \
            js.get("strict") is not True or not isinstance(js.get("schema"), dict) or \
            js["schema"].get("type") != "object" or \
            js["schema"].get("additionalProperties") is not False:
        return "json_schema needs name, strict: true and a closed object schema"
    if js["name"] not in ("memory_facts", "memory_decisions"):
        return "unknown schema name %r" % js["name"]
    return None


def facts_of(rules, transcript):
    facts = []
    for line in transcript.splitlines():
        m = LINE.match(line)
        if not m or m.group(2) != "user":
            continue
        seq, text = int(m.group(1)), m.group(3)
        for r in rules:
            hit = re.search(r["match"], text)
            if hit:
                facts.append({"text": hit.expand(r["text"]), "kind": r.get("kind", "fact"),
                              "topics": r.get("topics", []), "entities": r.get("entities", []),
                              "seqs": [seq]})
    return {"facts": facts}


def decisions_of(payload):
    out = []
    for c in json.loads(payload)["candidates"]:
        text = c["text"]
        forget = text.startswith("FORGET ")
        near = [e for e in c["existing"] if set(e["topics"]) & set(c["topics"])]
        d = {"candidate": c["index"], "memory_id": None, "text": text, "kind": c["kind"],
             "topics": c["topics"], "entities": c["entities"]}
        if forget:
            if not near:
                continue
            d.update(op="delete", memory_id=near[0]["id"])
        elif near and near[0]["text"] == text:
            d.update(op="none", memory_id=near[0]["id"])
        elif near:
            d.update(op="update", memory_id=near[0]["id"])
        else:
            d.update(op="add")
        out.append(d)
    return {"decisions": out}


class Handler(JsonHandler):
    server_version = "openai-chat-standin"

    def error(self, status, message):
        self.send(status, {"error": {"message": message, "type": "stand_in"}})

    def do_GET(self):
        st = self.server.state
        if self.path == "/stats":
            with st.lock:
                self.send(200, dict(st.counts, holding=st.holding, violations=st.violations,
                                    problems=st.problems[-10:], system=st.system,
                                    authorization=st.authorization))
        else:
            self.error(404, "not found")

    def do_POST(self):
        st = self.server.state
        raw = self.body()
        if self.path == "/release":
            st.released.set()
            self.send(200, {})
            return
        if self.path != "/v1/chat/completions":
            self.error(404, "not found: " + self.path)
            return
        try:
            req = json.loads(raw)
        except ValueError:
            req = None
        problem = contract_problem(req)
        if problem:
            with st.lock:
                st.violations += 1
                st.problems.append(problem)
            self.error(400, problem)
            return
        model, name = req["model"], req["response_format"]["json_schema"]["name"]
        with st.lock:
            st.counts[model] = st.counts.get(model, 0) + 1
            st.counts[name] = st.counts.get(name, 0) + 1
            st.system[name] = req["messages"][0]["content"]
            st.authorization = self.headers.get("Authorization")
            n = st.counts[model]
        if model == "flaky429" and n % 2 == 1:
            self.send(429, {"error": {"message": "rate limited", "type": "stand_in"}},
                      {"Retry-After": "0"})
            return
        if model == "error500":
            self.error(500, "internal error")
            return
        if (model == "hold" and name == "memory_decisions") or model == "holdall":
            with st.lock:
                st.holding += 1
            st.released.wait(HOLD_MAX_SECONDS)
            with st.lock:
                st.holding -= 1
        user = req["messages"][1]["content"]
        if model == "garbage":
            content = "Sure! Here are the memories: none, really."
        elif model == "badschema":
            content = json.dumps({"facts": [{"text": "", "kind": "opinion"}]})
        elif name == "memory_facts":
            content = json.dumps(facts_of(st.rules, user))
        else:
            d = decisions_of(user)
            if model == "badid":
                for x in d["decisions"]:
                    x.update(op="update", memory_id="not-shown")
            content = json.dumps(d)
        self.send(200, {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    with open(a.script) as f:
        rules = json.load(f)
    serve(a.port, Handler, State(rules))


if __name__ == "__main__":
    main()
