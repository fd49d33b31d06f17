#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A local Qdrant stand-in for memd's tests. It is NOT Qdrant: a small
in-memory server that follows Qdrant's published REST contract
(qdrant-openapi.json beside this file, see QDRANT_OPENAPI_ORIGIN.md) for
the endpoints memd's qdrant plugin uses, so the plugin can be tested where
a real Qdrant cannot run. Standard library only.

What it does like Qdrant:
  - the response envelopes {"result": ..., "status": "ok", "time": ...}
    and {"status": {"error": "..."}, "time": ...};
  - rejects what Qdrant rejects: every request is validated against the
    contract (path and query parameters, JSON body: e.g. a point id that
    is neither an unsigned integer nor a UUID) and refused with 400; a
    vector of the wrong size (400 "Vector dimension error"); a missing
    collection (404); creating an existing collection (409); a missing or
    wrong api-key header when started with --api-key (401; /healthz,
    /livez and /readyz stay open, as in Qdrant);
  - collections (one unnamed vector or named vectors; Cosine, Dot,
    Euclid, Manhattan), payload indexes, upsert (wait or not), query
    (nearest to a vector, with filter, limit, offset, score_threshold,
    with_payload, with_vector), delete by ids or by filter, filters with
    must / should / must_not / min_should, nested filters, has_id,
    match value / any / except, range, is_empty, is_null.
What it does not do: anything else the contract describes answers 501
"not implemented by the stand-in" (never a silent success).

Test hooks (not Qdrant endpoints; under /__standin/):
  GET  /__standin/requests[?collection=C]  every request received: method,
       path, query, collection, api_key ("ok" | "missing" | "wrong"),
       status, errors, warnings (properties the schema does not declare)
       and response_errors (the stand-in's own answer checked against the
       contract);
  GET  /__standin/summary[?collection=C]   counts of the above;
  POST /__standin/faults {"collection": C, "count": N, "status": 503}
       the next N requests touching collection C (or "*" = any) fail with
       that status; {"drop": true} closes the connection without an
       answer instead; {"delay_ms": D} answers normally after D ms.
  DELETE /__standin/faults[?collection=C]  drops the faults left for
       collection C (all of them without C): an outage that lasts until
       the test ends it.

Start: qdrant_standin.py [--port 0] [--api-key KEY] [--spec FILE];
prints "PORT <n>" on stdout once listening on 127.0.0.1.
"""

import argparse
import json
import math
import os
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import openapi_subset  # noqa: E402
import standin_http  # noqa: E402

DEFAULT_SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "qdrant-openapi.json")
OPEN_PATHS = ("/healthz", "/livez", "/readyz")
CONTROL_PREFIX = "/__standin/"
DISTANCES = ("Cosine", "Dot", "Euclid", "Manhattan")
DEFAULT_LIMIT = 10
COLLECTION_NAME_MAX = 255
MAX_BODY = 256 * 1024 * 1024


class ApiError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def not_implemented(what):
    return ApiError(501, "qdrant stand-in: %s is not implemented by the stand-in" % what)


def missing_collection(name):
    return ApiError(404, "Not found: Collection `%s` doesn't exist!" % name)


class Collection:
    def __init__(self, name, vectors):
        self.name = name
        self.vectors = vectors      # {"size", "distance"} or {name: {...}}
        self.points = {}            # id -> (vector(s), payload, version)
        self.payload_schema = {}    # field -> PayloadIndexInfo minus points
        self.version = 0

    def unnamed(self):
        return "size" in self.vectors

    def info(self):
        schema = {}
        for field, idx in self.payload_schema.items():
            n = sum(1 for p in self.points.values() if field in (p[1] or {}))
            schema[field] = dict(idx, points=n)
        return {
            "status": "green",
            "optimizer_status": "ok",
            "segments_count": 1,
            "points_count": len(self.points),
            "indexed_vectors_count": 0,
            "config": {
                "params": {"vectors": self.vectors, "shard_number": 1,
                           "replication_factor": 1,
                           "write_consistency_factor": 1,
                           "on_disk_payload": True},
                "hnsw_config": {"m": 16, "ef_construct": 100,
                                "full_scan_threshold": 10000,
                                "max_indexing_threads": 0},
                "optimizer_config": {"deleted_threshold": 0.2,
                                     "vacuum_min_vector_number": 1000,
                                     "default_segment_number": 0,
                                     "max_segment_size": None,
                                     "memmap_threshold": None,
                                     "indexing_threshold": 20000,
                                     "flush_interval_sec": 5,
                                     "max_optimization_threads": None},
                "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
                "quantization_config": None,
            },
            "payload_schema": schema,
        }


class State:
    def __init__(self, spec, api_key):
        self.spec = spec
        self.api_key = api_key
        self.lock = threading.Lock()
        self.collections = {}
        self.requests = []
        self.faults = []            # [{"collection", "count", ...}]
        self.operation_id = 0

    def next_operation(self):
        self.operation_id += 1
        return self.operation_id

    def take_fault(self, collection):
        with self.lock:
            for f in self.faults:
                if f["count"] > 0 and f["collection"] in ("*", collection):
                    f["count"] -= 1
                    return dict(f)
        return None


# ---- point ids, vectors, filters ---------------------------------------------

def point_id(raw):
    """Qdrant's canonical id: an unsigned integer or a lower-case UUID."""
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str):
        try:
            return str(uuid.UUID(raw))
        except ValueError:
            pass
    raise ApiError(400, "Format error in JSON body: value %s is not a valid point ID, "
                   "valid values are either an unsigned integer or a UUID" % json.dumps(raw))


def check_vector(coll, vec, name=None):
    params = coll.vectors if name is None else coll.vectors.get(name)
    if params is None or (name is None and not coll.unnamed()):
        raise ApiError(400, "Wrong input: Not existing vector name error: %s" %
                       (name if name is not None else ""))
    if not isinstance(vec, list) or not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in vec):
        raise not_implemented("a vector other than a dense list of numbers")
    if len(vec) != params["size"]:
        raise ApiError(400, "Wrong input: Vector dimension error: expected dim: %d, got %d" %
                       (params["size"], len(vec)))
    return params["distance"]


def score(distance, a, b):
    if distance == "Dot":
        return sum(x * y for x, y in zip(a, b))
    if distance == "Cosine":
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(x * x for x in b))
        if na == 0 or nb == 0:
            return 0.0
        return sum(x * y for x, y in zip(a, b)) / (na * nb)
    if distance == "Euclid":
        return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b)))
    return sum(abs(x - y) for x, y in zip(a, b))


def payload_values(payload, key):
    """The values at key (dotted path); arrays match by any element."""
    node = payload
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return []
        node = node[part]
    return node if isinstance(node, list) else [node]


def same_value(a, b):
    return type(a) is type(b) and a == b


def as_conditions(c):
    if c is None:
        return []
    return c if isinstance(c, list) else [c]


FIELD_CONDITIONS = ("match", "range", "geo_bounding_box", "geo_radius",
                    "geo_polygon", "values_count", "is_empty", "is_null")


def check_filter(flt):
    """Qdrant validates a whole filter before using it: every field
    condition must say what to test."""
    if not isinstance(flt, dict):
        return
    for part in ("must", "should", "must_not"):
        for c in as_conditions(flt.get(part)):
            if "key" in c:
                if not any(c.get(k) is not None for k in FIELD_CONDITIONS):
                    raise ApiError(400, "Validation error in JSON body: [%s: At least one "
                                   "field condition must be specified]" % c["key"])
            else:
                check_filter(c)
    if flt.get("min_should"):
        check_filter({"must": flt["min_should"]["conditions"]})


def field_condition(c, payload):
    given = [k for k in FIELD_CONDITIONS if c.get(k) is not None]
    values = payload_values(payload, c["key"])
    ok = True
    for k in given:
        v = c[k]
        if k == "match":
            if "value" in v:
                ok &= any(same_value(x, v["value"]) for x in values)
            elif "any" in v:
                ok &= any(same_value(x, y) for x in values for y in v["any"])
            elif "except" in v:
                ok &= bool(values) and not any(
                    same_value(x, y) for x in values for y in v["except"])
            else:
                raise not_implemented("match %s" % ",".join(sorted(v)))
        elif k == "range":
            nums = [x for x in values
                    if isinstance(x, (int, float)) and not isinstance(x, bool)]
            if any(isinstance(v.get(b), str) for b in ("gt", "gte", "lt", "lte")):
                raise not_implemented("datetime ranges")

            def in_range(x):
                return ((v.get("gt") is None or x > v["gt"]) and
                        (v.get("gte") is None or x >= v["gte"]) and
                        (v.get("lt") is None or x < v["lt"]) and
                        (v.get("lte") is None or x <= v["lte"]))
            ok &= any(in_range(x) for x in nums)
        elif k == "is_empty":
            ok &= (not values) == v
        elif k == "is_null":
            node = payload_values(payload, c["key"])
            ok &= (node == [None]) == v
        else:
            raise not_implemented("condition %s" % k)
    return ok


def condition(c, pid, payload):
    if "key" in c:
        return field_condition(c, payload)
    if "has_id" in c:
        return pid in [point_id(x) for x in c["has_id"]]
    if "is_empty" in c:
        return not payload_values(payload, c["is_empty"]["key"])
    if "is_null" in c:
        return payload_values(payload, c["is_null"]["key"]) == [None]
    if any(k in c for k in ("must", "should", "must_not", "min_should")) or not c:
        return filter_matches(c, pid, payload)
    raise not_implemented("condition %s" % ",".join(sorted(c)))


def filter_matches(flt, pid, payload):
    if flt is None:
        return True
    payload = payload or {}
    if not all(condition(c, pid, payload) for c in as_conditions(flt.get("must"))):
        return False
    if any(condition(c, pid, payload) for c in as_conditions(flt.get("must_not"))):
        return False
    should = as_conditions(flt.get("should"))
    if should and not any(condition(c, pid, payload) for c in should):
        return False
    ms = flt.get("min_should")
    if ms is not None:
        hits = sum(1 for c in ms["conditions"] if condition(c, pid, payload))
        if hits < ms["min_count"]:
            return False
    return True


def select_payload(payload, with_payload):
    if with_payload is None or with_payload is False:
        return None
    if with_payload is True:
        return payload
    if isinstance(with_payload, list):
        return {k: v for k, v in (payload or {}).items() if k in with_payload}
    if "include" in with_payload:
        return {k: v for k, v in (payload or {}).items()
                if k in with_payload["include"]}
    return {k: v for k, v in (payload or {}).items()
            if k not in with_payload["exclude"]}


# ---- operations ----------------------------------------------------------------

def update_result(state, wait):
    return {"operation_id": state.next_operation(),
            "status": "completed" if wait else "acknowledged"}


def op_create_collection(state, name, q, body):
    if not name or len(name) > COLLECTION_NAME_MAX or "/" in name:
        raise ApiError(422, "Validation error in path parameters: [name: invalid]")
    vectors = (body or {}).get("vectors")
    if vectors is None:
        raise not_implemented("a collection without dense vectors")
    if name in state.collections:
        raise ApiError(409, "Wrong input: Collection `%s` already exists!" % name)
    unnamed = "size" in vectors
    params = [vectors] if unnamed else list(vectors.values())
    for p in params:
        if p.get("multivector_config") or p.get("datatype") not in (None, "float32"):
            raise not_implemented("multivectors and vector datatypes")
    keep = (lambda p: {"size": p["size"], "distance": p["distance"]})
    state.collections[name] = Collection(
        name, keep(vectors) if unnamed else {k: keep(v) for k, v in vectors.items()})
    return True


def op_get_collection(state, name, q, body):
    coll = state.collections.get(name)
    if coll is None:
        raise missing_collection(name)
    return coll.info()


def op_collection_exists(state, name, q, body):
    return {"exists": name in state.collections}


def op_delete_collection(state, name, q, body):
    return state.collections.pop(name, None) is not None


def need(state, name):
    coll = state.collections.get(name)
    if coll is None:
        raise missing_collection(name)
    return coll


def op_create_index(state, name, q, body):
    coll = need(state, name)
    fs = body.get("field_schema")
    if fs is None:
        raise ApiError(400, "Bad request: Can't auto-detect field type, please specify "
                       "`field_schema` in the request")
    if isinstance(fs, str):
        coll.payload_schema[body["field_name"]] = {"data_type": fs}
    else:
        coll.payload_schema[body["field_name"]] = {"data_type": fs["type"], "params": fs}
    return update_result(state, q.get("wait") == "true")


def op_upsert(state, name, q, body):
    coll = need(state, name)
    if "points" not in body:
        raise not_implemented("the batch form of upsert")
    if body.get("update_filter") is not None or body.get("update_mode") is not None:
        raise not_implemented("conditional upserts")
    staged = []
    for p in body["points"]:
        pid = point_id(p["id"])
        vec = p["vector"]
        if isinstance(vec, dict):
            for vname, v in vec.items():
                check_vector(coll, v, vname)
        else:
            check_vector(coll, vec)
        staged.append((pid, vec, p.get("payload")))
    coll.version += 1
    for pid, vec, payload in staged:  # all or nothing, like one Qdrant operation
        coll.points[pid] = (vec, payload, coll.version)
    return update_result(state, q.get("wait") == "true")


def op_delete_points(state, name, q, body):
    coll = need(state, name)
    if "points" in body:
        for raw in body["points"]:
            coll.points.pop(point_id(raw), None)
    else:
        flt = body["filter"]
        check_filter(flt)
        for pid in [pid for pid, (v, payload, ver) in coll.points.items()
                    if filter_matches(flt, pid, payload)]:
            del coll.points[pid]
    coll.version += 1
    return update_result(state, q.get("wait") == "true")


def op_query(state, name, q, body):
    coll = need(state, name)
    for k in ("prefetch", "lookup_from", "shard_key"):
        if body.get(k) is not None:
            raise not_implemented(k)
    query = body.get("query")
    if isinstance(query, dict):
        if set(query) - {"nearest"} or not isinstance(query.get("nearest"), list):
            raise not_implemented("queries other than nearest to a dense vector")
        query = query["nearest"]
    if not isinstance(query, list):
        raise not_implemented("queries other than nearest to a dense vector")
    using = body.get("using")
    distance = check_vector(coll, query, using)
    limit = body.get("limit") or DEFAULT_LIMIT
    offset = body.get("offset") or 0
    threshold = body.get("score_threshold")
    flt = body.get("filter")
    check_filter(flt)
    larger_is_better = distance in ("Cosine", "Dot")
    scored = []
    for pid, (vec, payload, version) in coll.points.items():
        if not filter_matches(flt, pid, payload):
            continue
        v = vec.get(using) if isinstance(vec, dict) else vec
        if v is None:
            continue
        s = score(distance, query, v)
        if threshold is not None and (s < threshold if larger_is_better else s > threshold):
            continue
        scored.append((s, pid, payload, version, vec))
    scored.sort(key=lambda t: (-t[0] if larger_is_better else t[0], str(t[1])))
    points = []
    for s, pid, payload, version, vec in scored[offset:offset + limit]:
        pt = {"id": pid, "version": version, "score": s,
              "payload": select_payload(payload, body.get("with_payload"))}
        if body.get("with_vector"):
            pt["vector"] = vec
        points.append(pt)
    return {"points": points}


ROUTES = {
    ("PUT", "/collections/{collection_name}"): op_create_collection,
    ("GET", "/collections/{collection_name}"): op_get_collection,
    ("DELETE", "/collections/{collection_name}"): op_delete_collection,
    ("GET", "/collections/{collection_name}/exists"): op_collection_exists,
    ("PUT", "/collections/{collection_name}/index"): op_create_index,
    ("PUT", "/collections/{collection_name}/points"): op_upsert,
    ("POST", "/collections/{collection_name}/points/delete"): op_delete_points,
    ("POST", "/collections/{collection_name}/points/query"): op_query,
}
TEXT_ROUTES = {
    "/healthz": "healthz check passed",
    "/livez": "healthz check passed",
    "/readyz": "all shards are ready",
}


# ---- HTTP ----------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "qdrant-standin"

    def log_message(self, fmt, *args):  # quiet: tests read /__standin/requests
        pass

    def do_GET(self):
        self.handle_any("GET")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_POST(self):
        self.handle_any("POST")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def do_PATCH(self):
        self.handle_any("PATCH")

    def send(self, status, obj=None, text=None):
        if text is not None:
            data, ctype = text.encode(), "text/plain"
        else:
            data, ctype = json.dumps(obj).encode(), "application/json"
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self, method):
        st = self.server.state
        started = time.monotonic()
        url = urllib.parse.urlsplit(self.path)
        path, query = url.path, url.query
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if 0 < n <= MAX_BODY else b""
        if path.startswith(CONTROL_PREFIX):
            return self.control(method, path, query, raw)

        rec = {"method": method, "path": path, "query": query, "collection": None,
               "api_key": "ok", "status": None, "errors": [], "warnings": [],
               "response_errors": []}
        m = st.spec.match(method, path)
        if m and "collection_name" in m[2]:
            rec["collection"] = m[2]["collection_name"]
        key = self.headers.get("api-key")
        if st.api_key is not None:
            if key is None:
                rec["api_key"] = "missing"
            elif key != st.api_key:
                rec["api_key"] = "wrong"
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError as e:
                rec["errors"].append("body is not JSON: %s" % e)
        if body is not None or not rec["errors"]:
            e, w = st.spec.check_request(method, path, query, body)
            rec["errors"] += e
            rec["warnings"] += w
        with st.lock:
            st.requests.append(rec)

        fault = st.take_fault(rec["collection"])
        if fault and fault.get("drop"):
            rec["status"] = "dropped"
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if fault and fault.get("delay_ms"):
            time.sleep(fault["delay_ms"] / 1000.0)
            fault = None

        status, result, text = 200, None, None
        try:
            if fault:
                raise ApiError(fault.get("status", 503), "Service internal error: "
                               "fault injected by the qdrant stand-in")
            if rec["api_key"] != "ok" and path not in OPEN_PATHS:
                raise ApiError(401, "Must provide an API key or an Authorization bearer "
                               "token" if rec["api_key"] == "missing" else
                               "Invalid API key or JWT")
            if m is None:
                raise ApiError(404, "Not found: %s %s" % (method, path))
            if rec["errors"]:
                raise ApiError(400, "Format error in JSON body: %s" % rec["errors"][0])
            if path in TEXT_ROUTES and method == "GET":
                text = TEXT_ROUTES[path]
            else:
                fn = ROUTES.get((method, m[0]))
                if fn is None:
                    raise not_implemented("%s %s" % (method, m[0]))
                with st.lock:
                    result = fn(st, rec["collection"], dict(urllib.parse.parse_qsl(query)),
                                body or {})
        except ApiError as e:
            status = e.status
            resp = {"status": {"error": e.message}, "time": time.monotonic() - started}
        else:
            resp = {"result": result, "status": "ok", "time": time.monotonic() - started}
        rec["status"] = status
        if text is not None and status == 200:
            return self.send(status, text=text)
        rec["response_errors"] = st.spec.check_response(method, path, status, resp)
        self.send(status, resp)

    def control(self, method, path, query, raw):
        st = self.server.state
        q = dict(urllib.parse.parse_qsl(query))
        want = q.get("collection")
        with st.lock:
            reqs = [r for r in st.requests if want is None or r["collection"] == want]
            if method == "GET" and path == CONTROL_PREFIX + "requests":
                return self.send(200, reqs)
            if method == "GET" and path == CONTROL_PREFIX + "summary":
                return self.send(200, {
                    "requests": len(reqs),
                    "invalid": sum(1 for r in reqs if r["errors"]),
                    "with_warnings": sum(1 for r in reqs if r["warnings"]),
                    "bad_responses": sum(1 for r in reqs if r["response_errors"]),
                    "without_api_key": sum(1 for r in reqs if r["api_key"] != "ok"),
                    "problems": [r for r in reqs if r["errors"] or r["warnings"] or
                                 r["response_errors"]][:10],
                })
            if method == "POST" and path == CONTROL_PREFIX + "faults":
                f = json.loads(raw or b"{}")
                f.setdefault("collection", "*")
                f.setdefault("count", 1)
                st.faults.append(f)
                return self.send(200, {"ok": True})
            if method == "DELETE" and path == CONTROL_PREFIX + "faults":
                st.faults = [f for f in st.faults if want is not None and
                             f["collection"] != want]
                return self.send(200, {"ok": True})
        self.send(404, {"error": "no such stand-in hook"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--spec", default=DEFAULT_SPEC)
    args = ap.parse_args()
    standin_http.serve(args.port, Handler,
                       State(openapi_subset.Spec(args.spec), args.api_key))


if __name__ == "__main__":
    main()
