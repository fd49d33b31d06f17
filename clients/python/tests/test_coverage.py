# SPDX-License-Identifier: MIT
"""Every operation of api/openapi.yaml has its method, named as its
operationId in snake_case, taking the path parameters positionally in
the path's order, the body after them where there is one, and the query
parameters keyword-only by their names; and each method sends its
operation's HTTP method, path and query. Fails when the API grows an
operation (or a parameter) the client does not have."""

from __future__ import annotations

import inspect
import keyword
import os
import re
import unittest
import urllib.parse
from pathlib import Path
from typing import Any, Dict, List, Set

from memd_client import Client
from standins import StandIn, memd_client

MCP_OPERATIONS = {"mcpMessage", "mcpEndSession"}  # MCP clients speak MCP
ITERATORS = {"iter_sessions", "iter_events", "iter_lanes", "iter_app_lanes", "iter_memories",
             "iter_tasks"}
METHODS = ("get", "put", "post", "delete", "patch")


def spec_path() -> Path:
    root = os.environ.get("MEMD_SOURCE_ROOT")
    if root:
        return Path(root) / "api" / "openapi.yaml"
    return Path(__file__).resolve().parents[3] / "api" / "openapi.yaml"


def snake(operation_id: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), operation_id)


def py_name(name: str) -> str:
    """A query parameter's keyword: its name, with "_" after a Python
    keyword (``return`` is ``return_``)."""
    return name + "_" if keyword.iskeyword(name) else name


def yaml_operation_ids() -> Set[str]:
    text = spec_path().read_text(encoding="utf-8")
    return set(re.findall(r"^\s+operationId:\s*([A-Za-z0-9_]+)\s*$", text, re.M))


class Operation:
    def __init__(self, spec: Dict[str, Any], path: str, method: str, op: Dict[str, Any],
                 common: List[Dict[str, Any]]) -> None:
        def resolve(p: Dict[str, Any]) -> Dict[str, Any]:
            if "$ref" in p:
                return spec["components"]["parameters"][p["$ref"].rsplit("/", 1)[1]]
            return p

        params = [resolve(p) for p in common] + [resolve(p) for p in op.get("parameters", [])]
        self.id: str = op["operationId"]
        self.name = snake(self.id)
        self.path = path
        self.method = method.upper()
        self.path_params = re.findall(r"\{(\w+)\}", path)
        self.query = {p["name"]: p.get("schema", {}) for p in params if p["in"] == "query"}
        self.header_params = {p["name"] for p in params if p["in"] == "header"}
        self.body = op.get("requestBody")


def operations(spec: Dict[str, Any]) -> List[Operation]:
    out = []
    for path, item in spec["paths"].items():
        for method in METHODS:
            if method in item and item[method]["operationId"] not in MCP_OPERATIONS:
                out.append(Operation(spec, path, method, item[method], item.get("parameters", [])))
    return out


class Coverage(unittest.TestCase):
    spec: Dict[str, Any]
    ops: List[Operation]

    @classmethod
    def setUpClass(cls) -> None:
        # memd serves api/openapi.yaml as JSON: parsed here without a YAML
        # library, and checked below to be the same operations.
        cls.spec = memd_client().openapi()
        cls.ops = operations(cls.spec)

    def test_every_operation_of_the_yaml_has_a_method(self) -> None:
        ids = yaml_operation_ids() - MCP_OPERATIONS
        self.assertGreater(len(ids), 50, f"too few operationIds read from {spec_path()}")
        missing = sorted(i for i in ids if not callable(getattr(Client, snake(i), None)))
        self.assertEqual(missing, [], "operations without a method in memd_client.Client")

    def test_the_served_document_is_the_yaml(self) -> None:
        self.assertEqual({op.id for op in self.ops}, yaml_operation_ids() - MCP_OPERATIONS)

    def test_no_method_without_an_operation(self) -> None:
        public = {n for n in dir(Client) if not n.startswith("_") and callable(getattr(Client, n))}
        extra = public - {op.name for op in self.ops} - ITERATORS
        self.assertEqual(extra, set(), "methods of no operation")

    def test_signatures_follow_the_spec(self) -> None:
        for op in self.ops:
            with self.subTest(op=op.id):
                sig = inspect.signature(getattr(Client, op.name))
                params = list(sig.parameters.values())[1:]  # self
                positional = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
                body = []
                if op.body:
                    body = ["data"] if op.id == "putArtifact" else ["body"]
                self.assertEqual(positional, op.path_params + body)
                required = op.path_params + (body if op.body and op.body.get("required") else [])
                for p in params:
                    if p.name in required:
                        self.assertIs(p.default, p.empty, f"{p.name} is required")
                keywords = {p.name for p in params if p.kind == p.KEYWORD_ONLY}
                want = {py_name(n) for n in op.query} | {"timeout", "headers"}
                if "If-Match" in op.header_params:
                    want.add("if_match")
                if "If-None-Match" in op.header_params:
                    want.add("if_none_match")
                if op.id == "putArtifact":
                    want.add("content_type")
                self.assertEqual(keywords, want)
                self.assertFalse(any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params))


def sample_query(schema: Dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind == "integer":
        return 7
    if kind == "boolean":
        return True
    if "enum" in schema:
        return schema["enum"][0]
    return "a+b c/é"  # a plus, a space, a slash and UTF-8, each to be encoded


def wire(value: Any) -> str:
    if value is True:
        return "true"
    return str(value)


class Requests(unittest.TestCase):
    """Each method against a stand-in for memd that answers 200 to
    everything and keeps what it received: the method, the raw path (each
    path parameter percent-encoded whole) and the query."""

    ops: List[Operation]

    @classmethod
    def setUpClass(cls) -> None:
        cls.ops = operations(memd_client().openapi())

    def test_each_method_sends_its_operation(self) -> None:
        with StandIn() as stand_in:
            client = Client(stand_in.url, api_key="k" * 32, retries=0)
            for op in self.ops:
                with self.subTest(op=op.id):
                    values = {p: f"{p} x/é:%" for p in op.path_params}
                    args: List[Any] = [values[p] for p in op.path_params]
                    if op.body:
                        args.append(b"\x00bytes" if op.id == "putArtifact" else {})
                    query = {name: sample_query(schema) for name, schema in op.query.items()}
                    extra: Dict[str, Any] = {}
                    if "If-Match" in op.header_params:
                        extra["if_match"] = 3
                    before = len(stand_in.seen)
                    kwargs = {py_name(n): v for n, v in query.items()}
                    getattr(client, op.name)(*args, **kwargs, **extra)
                    self.assertEqual(len(stand_in.seen), before + 1)
                    seen = stand_in.seen[-1]
                    self.assertEqual(seen.method, op.method)
                    want_path = re.sub(
                        r"\{(\w+)\}",
                        lambda m: urllib.parse.quote(values[m.group(1)], safe=""),
                        op.path,
                    )
                    self.assertEqual(seen.path, want_path)
                    self.assertNotIn("+", seen.query)  # memd reads + as a space
                    self.assertEqual(
                        sorted(seen.query_pairs()), sorted((k, wire(v)) for k, v in query.items())
                    )
                    self.assertEqual(seen.headers.get("Authorization"), "Bearer " + "k" * 32)
                    if op.body and op.id != "putArtifact":
                        self.assertEqual(seen.headers.get("Content-Type"), "application/json")
                    if op.method in ("POST", "PUT", "PATCH") and not op.body:
                        self.assertEqual(seen.body, b"")
                    if extra:
                        self.assertEqual(seen.headers.get("If-Match"), '"3"')


if __name__ == "__main__":
    unittest.main()
