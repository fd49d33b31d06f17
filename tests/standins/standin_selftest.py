#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Self-test of memd's local stand-ins: they must reject what the real
peers reject (so a plugin tested against them cannot get away with what
the real Qdrant or OpenAI API would refuse), and their contract validator
must catch what the contract forbids. Standard library only."""

import hashlib
import hmac
import json
import os
import subprocess
import sys
import unittest
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import openapi_subset  # noqa: E402

LOCAL_SPEC = os.path.join(HERE, "qdrant-openapi.json")
KEY = "selftest-key"


def start(script, *args):
    p = subprocess.Popen([sys.executable, os.path.join(HERE, script)] + list(args),
                         stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    assert line.startswith("PORT "), "%s did not start" % script
    return p, int(line.split()[1])


def call(base, method, path, body=None, headers=None):
    """(status, parsed JSON or text)."""
    data = None if body is None else (body if isinstance(body, bytes)
                                      else json.dumps(body).encode())
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            status, raw, ctype = r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, raw, ctype = e.code, e.read(), e.headers.get("Content-Type", "")
    if "json" in ctype:
        return status, json.loads(raw)
    return status, raw.decode()


class Contract(unittest.TestCase):
    def test_copy_matches_the_shared_reference(self):
        root = os.environ.get("MEMD_SOURCE_ROOT")
        shared = root and os.path.join(root, "..", "shared", "reference",
                                       "qdrant-openapi.json")
        if not shared or not os.path.isfile(shared):
            self.skipTest("no shared/reference beside the checkout")
        with open(shared, "rb") as a, open(LOCAL_SPEC, "rb") as b:
            self.assertEqual(a.read(), b.read(), "tests/standins/qdrant-openapi.json "
                             "differs from shared/reference: copy it again")


class Validator(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.spec = openapi_subset.Spec(LOCAL_SPEC)

    def errors(self, ref, value):
        return self.spec.validate({"$ref": "#/components/schemas/" + ref}, value)[0]

    def test_point_ids(self):
        self.assertEqual(self.errors("ExtendedPointId", 7), [])
        self.assertEqual(self.errors("ExtendedPointId", str(uuid.uuid4())), [])
        self.assertNotEqual(self.errors("ExtendedPointId", "event-1"), [])
        self.assertNotEqual(self.errors("ExtendedPointId", -1), [])
        self.assertNotEqual(self.errors("ExtendedPointId", True), [])

    def test_nullable_and_types(self):
        self.assertEqual(self.errors("VectorParams", {"size": 3, "distance": "Dot"}), [])
        self.assertNotEqual(self.errors("VectorParams", {"size": 0, "distance": "Dot"}), [])
        self.assertNotEqual(self.errors("VectorParams", {"size": 3, "distance": "dot"}), [])
        self.assertNotEqual(self.errors("VectorParams", {"size": 3.5, "distance": "Dot"}),
                            [])
        self.assertNotEqual(self.errors("VectorParams", {"size": None, "distance": "Dot"}),
                            [])
        self.assertEqual(self.errors("QueryRequest", {"filter": None, "limit": 3}), [])
        self.assertNotEqual(self.errors("QueryRequest", {"limit": 0}), [])
        self.assertNotEqual(self.errors("QueryRequest", {"with_payload": "yes"}), [])

    def test_filters(self):
        good = {"must": [{"key": "app", "match": {"value": "a"}},
                         {"key": "author", "match": {"any": ["x", "y"]}},
                         {"key": "t", "range": {"gt": 1, "lt": 5}}]}
        self.assertEqual(self.errors("Filter", good), [])
        self.assertNotEqual(self.errors("Filter", {"mustt": []}), [],
                            "Filter has additionalProperties: false")
        self.assertNotEqual(self.errors("Filter", {"must": [{"key": "a", "match": {
            "any": ["x", "x"]}}]}), [], "MatchAny items are unique")

    def test_undeclared_properties_warn(self):
        e, w = self.spec.validate({"$ref": "#/components/schemas/QueryRequest"},
                                  {"limit": 3, "with_payloads": True})
        self.assertEqual(e, [])
        self.assertEqual(len(w), 1)

    def test_requests(self):
        e, _ = self.spec.check_request("PUT", "/collections/c/points", "wait=true",
                                       {"points": [{"id": 1, "vector": [1.0]}]})
        self.assertEqual(e, [])
        e, _ = self.spec.check_request("PUT", "/collections/c/points", "wait=yes",
                                       {"points": []})
        self.assertNotEqual(e, [], "wait is a boolean")
        e, _ = self.spec.check_request("PUT", "/collections/c/points", "sync=true",
                                       {"points": []})
        self.assertNotEqual(e, [], "unknown query parameter")
        e, _ = self.spec.check_request("GET", "/no/such/thing", "", None)
        self.assertNotEqual(e, [])


class QdrantStandin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, port = start("qdrant_standin.py", "--api-key", KEY)
        cls.base = "http://127.0.0.1:%d" % port
        cls.auth = {"api-key": KEY}

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()

    def q(self, method, path, body=None, auth=True):
        return call(self.base, method, path, body, self.auth if auth else None)

    def create(self, name, size=3, distance="Cosine"):
        s, r = self.q("PUT", "/collections/" + name,
                      {"vectors": {"size": size, "distance": distance}})
        self.assertEqual(s, 200, r)
        self.assertEqual(r["status"], "ok")
        self.assertIs(r["result"], True)

    def test_api_key(self):
        s, r = self.q("GET", "/collections/x", auth=False)
        self.assertEqual(s, 401)
        self.assertIn("error", r["status"])
        s, _ = call(self.base, "GET", "/collections/x", headers={"api-key": "nope"})
        self.assertEqual(s, 401)
        s, text = self.q("GET", "/readyz", auth=False)
        self.assertEqual((s, text), (200, "all shards are ready"))

    def test_create_twice_is_409(self):
        self.create("twice")
        s, r = self.q("PUT", "/collections/twice", {"vectors": {"size": 3,
                                                                "distance": "Cosine"}})
        self.assertEqual(s, 409)
        self.assertIn("already exists", r["status"]["error"])

    def test_missing_collection_is_404(self):
        for method, path, body in (
                ("GET", "/collections/nope", None),
                ("PUT", "/collections/nope/points?wait=true",
                 {"points": [{"id": 1, "vector": [1, 2, 3]}]}),
                ("POST", "/collections/nope/points/query", {"query": [1, 2, 3]}),
                ("POST", "/collections/nope/points/delete",
                 {"filter": {"must": [{"key": "a", "match": {"value": "b"}}]}}),
                ("PUT", "/collections/nope/index", {"field_name": "a",
                                                    "field_schema": "keyword"})):
            s, r = self.q(method, path, body)
            self.assertEqual(s, 404, (method, path, r))
            self.assertIn("doesn't exist", r["status"]["error"])

    def test_string_point_ids_are_rejected(self):
        self.create("strid")
        s, r = self.q("PUT", "/collections/strid/points?wait=true",
                      {"points": [{"id": "event-1", "vector": [1, 2, 3]}]})
        self.assertEqual(s, 400)
        self.assertIn("Format error in JSON body", r["status"]["error"])
        self.assertIn("id", r["status"]["error"])
        # A UUID in any case is accepted and stored in canonical form.
        u = str(uuid.uuid4())
        s, r = self.q("PUT", "/collections/strid/points?wait=true",
                      {"points": [{"id": u.upper(), "vector": [1, 2, 3]}]})
        self.assertEqual(s, 200, r)
        s, r = self.q("POST", "/collections/strid/points/query", {"query": [1, 2, 3]})
        self.assertEqual(r["result"]["points"][0]["id"], u)
        s, r = self.q("GET", "/__standin/summary?collection=strid", auth=False)
        self.assertEqual(r["invalid"], 1, "the string id is recorded as invalid")

    def test_wrong_vector_size_is_rejected(self):
        self.create("wsize", size=3)
        s, r = self.q("PUT", "/collections/wsize/points?wait=true",
                      {"points": [{"id": 1, "vector": [1, 2, 3]},
                                  {"id": 2, "vector": [1, 2]}]})
        self.assertEqual(s, 400)
        self.assertIn("Vector dimension error: expected dim: 3, got 2",
                      r["status"]["error"])
        s, r = self.q("POST", "/collections/wsize/points/query", {"query": [1, 2, 3]})
        self.assertEqual(r["result"]["points"], [], "a refused batch writes nothing")
        s, r = self.q("POST", "/collections/wsize/points/query", {"query": [1, 2]})
        self.assertEqual(s, 400)

    def test_bad_bodies_are_rejected(self):
        self.create("bodies")
        for body in ({"query": [1, 2, 3], "filter": {"must": [
                         {"key": "a", "match": {"any": ["x", "x"]}}]}},
                     {"query": [1, 2, 3], "filter": {"muts": []}},
                     {"query": [1, 2, 3], "limit": 0},
                     {"query": [1, 2, 3], "filter": {"must": [{"key": "a"}]}}):
            s, r = self.q("POST", "/collections/bodies/points/query", body)
            self.assertEqual(s, 400, (body, r))
        s, r = self.q("PUT", "/collections/bodies/points?wait=maybe",
                      {"points": [{"id": 1, "vector": [1, 2, 3]}]})
        self.assertEqual(s, 400)
        s, r = self.q("PUT", "/collections/bad-vec", {"vectors": {"size": 0,
                                                                   "distance": "Cosine"}})
        self.assertEqual(s, 400)

    def test_filters_payloads_and_delete(self):
        self.create("filt", size=2)
        pts = [{"id": i, "vector": v, "payload": p} for i, (v, p) in enumerate([
            ([1, 0], {"user": "a", "author": "x", "t": 10}),
            ([0, 1], {"user": "a", "author": "y", "t": 20}),
            ([1, 1], {"user": "b", "author": "x", "t": 30}),
        ])]
        s, r = self.q("PUT", "/collections/filt/points?wait=true", {"points": pts})
        self.assertEqual(r["result"]["status"], "completed")

        def ids(flt, **kw):
            body = dict({"query": [1, 0], "filter": flt, "with_payload": True}, **kw)
            s, r = self.q("POST", "/collections/filt/points/query", body)
            self.assertEqual(s, 200, r)
            return [p["id"] for p in r["result"]["points"]]
        must_a = {"key": "user", "match": {"value": "a"}}
        self.assertEqual(ids({"must": [must_a]}), [0, 1])
        self.assertEqual(ids({"must": [must_a]}, limit=1), [0])
        self.assertEqual(ids({"must": [{"key": "author", "match": {"any": ["x"]}}]}), [0, 2])
        self.assertEqual(ids({"must": [{"key": "t", "range": {"gt": 10, "lt": 30}}]}), [1])
        self.assertEqual(ids({"must_not": [must_a]}), [2])
        self.assertEqual(ids({"should": [must_a, {"key": "t", "range": {"gte": 30}}]}),
                         [0, 2, 1])
        s, r = self.q("POST", "/collections/filt/points/delete?wait=true",
                      {"filter": {"must": [must_a]}})
        self.assertEqual(s, 200, r)
        self.assertEqual(ids(None), [2])

    def test_scores(self):
        self.create("dot", size=2, distance="Dot")
        self.q("PUT", "/collections/dot/points", {"points": [
            {"id": 1, "vector": [2, 0]}, {"id": 2, "vector": [0, 3]}]})
        s, r = self.q("POST", "/collections/dot/points/query", {"query": [1, 1]})
        self.assertEqual([(p["id"], p["score"]) for p in r["result"]["points"]],
                         [(2, 3.0), (1, 2.0)])

    def test_unimplemented_is_501_not_success(self):
        self.create("nyi")
        s, r = self.q("POST", "/collections/nyi/points/query",
                      {"query": {"fusion": "rrf"}})
        self.assertEqual(s, 501)
        self.assertIn("stand-in", r["status"]["error"])

    def test_faults(self):
        self.create("faulty")
        call(self.base, "POST", "/__standin/faults",
             {"collection": "faulty", "count": 1, "status": 503})
        s, r = self.q("GET", "/collections/faulty")
        self.assertEqual(s, 503)
        s, r = self.q("GET", "/collections/faulty")
        self.assertEqual(s, 200)

    def test_own_answers_follow_the_contract(self):
        self.create("answers")
        self.q("PUT", "/collections/answers/index?wait=true",
               {"field_name": "user", "field_schema": {"type": "keyword", "is_tenant": True}})
        self.q("PUT", "/collections/answers/points?wait=true", {"points": [
            {"id": 1, "vector": [1, 2, 3], "payload": {"user": "u"}}]})
        self.q("GET", "/collections/answers")
        self.q("POST", "/collections/answers/points/query", {"query": [1, 2, 3]})
        s, r = call(self.base, "GET", "/__standin/summary?collection=answers")
        self.assertEqual(r["bad_responses"], 0, r["problems"])
        self.assertEqual(r["invalid"], 0, r["problems"])


class OpenAIStandin(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, port = start("openai_embeddings_standin.py", "--api-key", KEY, "--dim", "6",
                               "--max-batch", "4")
        cls.base = "http://127.0.0.1:%d" % port

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()

    def embed(self, body, key=KEY):
        h = {"Authorization": "Bearer " + key} if key else {}
        return call(self.base, "POST", "/v1/embeddings", body, h)

    def test_embeddings(self):
        s, r = self.embed({"model": "m", "input": ["the cat", "a dog", "the cat"]})
        self.assertEqual(s, 200, r)
        self.assertEqual(r["object"], "list")
        vs = [d["embedding"] for d in sorted(r["data"], key=lambda d: d["index"])]
        self.assertEqual(len(vs[0]), 6)
        self.assertEqual(vs[0], vs[2], "deterministic")
        self.assertAlmostEqual(sum(x * x for x in vs[1]), 1.0, places=6)
        s, r = self.embed({"model": "m", "input": "one", "dimensions": 3})
        self.assertEqual(len(r["data"][0]["embedding"]), 3)

    def test_refusals(self):
        self.assertEqual(self.embed({"model": "m", "input": ["a"]}, key=None)[0], 401)
        self.assertEqual(self.embed({"model": "m", "input": ["a"]}, key="x")[0], 401)
        self.assertEqual(self.embed({"input": ["a"]})[0], 400)
        self.assertEqual(self.embed({"model": "m", "input": [""]})[0], 400)
        self.assertEqual(self.embed({"model": "m", "input": []})[0], 400)
        s, r = self.embed({"model": "m", "input": ["a"] * 5})
        self.assertEqual(s, 400)
        self.assertIn("too long", r["error"]["message"])

    def test_modes(self):
        call(self.base, "POST", "/__standin/models",
             {"model": "flaky", "mode": "fail", "status": 503, "count": 2})
        self.assertEqual(self.embed({"model": "flaky", "input": ["a"]})[0], 503)
        self.assertEqual(self.embed({"model": "flaky", "input": ["a"]})[0], 503)
        self.assertEqual(self.embed({"model": "flaky", "input": ["a"]})[0], 200)
        call(self.base, "POST", "/__standin/models", {"model": "rev", "reverse": True})
        s, r = self.embed({"model": "rev", "input": ["a", "b"]})
        self.assertEqual([d["index"] for d in r["data"]], [1, 0])
        s, reqs = call(self.base, "GET", "/__standin/requests?model=flaky")
        self.assertEqual([q["status"] for q in reqs], [503, 503, 200])


class WebhookStandin(unittest.TestCase):
    """The receiver refuses what a receiver checking signatures must."""

    @classmethod
    def setUpClass(cls):
        cls.proc, port = start("webhook_standin.py", "--secret", KEY)
        cls.base = "http://127.0.0.1:%d" % port

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()

    def deliver(self, body, ts="1700000000", secret=KEY, ctype=None, path="/hook"):
        sig = "sha256=" + hmac.new(secret.encode(), ts.encode() + b"." + body,
                                   hashlib.sha256).hexdigest()
        headers = {"X-Memd-Timestamp": ts, "X-Memd-Signature": sig}
        if ctype:
            headers["Content-Type"] = ctype
        return call(self.base, "POST", path, body, headers)[0]

    def test_signatures_and_plans(self):
        self.assertEqual(self.deliver(b'{"a": 1}'), 200)
        self.assertEqual(self.deliver(b'{"a": 1}', secret="other"), 401)
        self.assertEqual(self.deliver(b'{"a": 1}', ts="soon"), 400)
        self.assertEqual(self.deliver(b"not json"), 400)
        call(self.base, "POST", "/__standin/plan", {"path": "/hook", "fail": 1,
                                                    "status": 503})
        self.assertEqual(self.deliver(b'{"a": 2}', path="/other"), 200)
        self.assertEqual(self.deliver(b'{"a": 2}'), 503)
        self.assertEqual(self.deliver(b'{"a": 2}'), 200)
        status, reqs = call(self.base, "GET", "/__standin/requests?path=/hook")
        self.assertEqual([r["status"] for r in reqs], [200, 401, 400, 400, 503, 200])
        self.assertEqual([r["signature_ok"] for r in reqs],
                         [True, False, True, True, True, True])


if __name__ == "__main__":
    unittest.main(verbosity=2)
