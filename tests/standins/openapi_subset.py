# SPDX-License-Identifier: MIT
"""A validator for the subset of OpenAPI 3.0 / JSON Schema that Qdrant's
published contract (qdrant-openapi.json) uses, for memd's test stand-ins.
Standard library only.

Schema keywords: $ref (local "#/..."), type, nullable, format, enum,
minimum, maximum, minLength, minItems, uniqueItems, required, properties,
additionalProperties (false or a schema), items, anyOf, oneOf, allOf.
OpenAPI 3.0 semantics: null is valid only where "nullable": true; the
idiom anyOf [T, {"nullable": true}] means "T or null" (a schema made of
nothing but "nullable": true accepts only null).

validate() returns (errors, warnings). Errors are contract violations
(what the real server rejects). Warnings are properties the schema does
not declare: the contract lets a server ignore them, but a client that
sends them has most likely misspelled something, so tests assert there
are none.

Operations: Spec.match(method, path) finds the path template and the
operation; Spec.check_request() validates path and query parameters and
the JSON body; Spec.check_response() validates a JSON answer against the
documented response schema for its status.
"""

import json
import re
import urllib.parse

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?"
                        r"([Zz]|[+-]\d{2}:?\d{2})?$")
_UINT_MAX = {"uint8": 2**8 - 1, "uint32": 2**32 - 1, "uint64": 2**64 - 1,
             "uint": 2**64 - 1}
_INT64 = (-(2**63), 2**63 - 1)
# Keywords that only document (no constraint).
_ANNOTATIONS = {"description", "example", "default", "deprecated", "title",
                "name"}


def _type_ok(t, v):
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    raise ValueError("schema uses unknown type %r" % t)


def _canon(v):
    return json.dumps(v, sort_keys=True)


class Spec:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self._templates = []
        for tmpl, ops in self.doc.get("paths", {}).items():
            names = re.findall(r"\{([^}]+)\}", tmpl)
            rx = "^" + re.sub(r"\\\{[^}]+\\\}", "([^/]+)", re.escape(tmpl)) + "$"
            self._templates.append((re.compile(rx), tmpl, names, ops))
        # Literal paths first, so /collections/aliases beats
        # /collections/{collection_name}.
        self._templates.sort(key=lambda t: t[1].count("{"))

    # ---- schemas -----------------------------------------------------------

    def resolve(self, ref):
        if not ref.startswith("#/"):
            raise ValueError("only local $ref is supported: %r" % ref)
        node = self.doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return node

    def validate(self, schema, value, where="$"):
        """(errors, warnings) of value against schema."""
        errors, warnings = [], []
        self._validate(schema, value, where, errors, warnings)
        return errors, warnings

    def _validate(self, s, v, where, errors, warnings):
        if "$ref" in s:
            return self._validate(self.resolve(s["$ref"]), v, where, errors,
                                  warnings)
        constraining = [k for k in s if k not in _ANNOTATIONS]
        if v is None:
            if s.get("nullable") is True:
                return
            if constraining and all(k in ("anyOf", "oneOf", "allOf")
                                    for k in constraining):
                pass  # the alternatives decide
            elif constraining:
                errors.append("%s: null is not allowed" % where)
                return
            else:
                return  # {} accepts anything
        elif constraining == ["nullable"]:
            errors.append("%s: only null is allowed here" % where)
            return
        if "type" in s and not _type_ok(s["type"], v):
            errors.append("%s: expected %s, got %s" %
                          (where, s["type"], type(v).__name__))
            return
        if "enum" in s and v not in s["enum"]:
            errors.append("%s: %r is not one of %r" % (where, v, s["enum"]))
        self._format(s, v, where, errors)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if "minimum" in s and v < s["minimum"]:
                errors.append("%s: %r is below the minimum %r" %
                              (where, v, s["minimum"]))
            if "maximum" in s and v > s["maximum"]:
                errors.append("%s: %r is above the maximum %r" %
                              (where, v, s["maximum"]))
        if isinstance(v, str) and "minLength" in s and len(v) < s["minLength"]:
            errors.append("%s: shorter than %d" % (where, s["minLength"]))
        if isinstance(v, list):
            if "minItems" in s and len(v) < s["minItems"]:
                errors.append("%s: fewer than %d items" % (where, s["minItems"]))
            if s.get("uniqueItems"):
                seen = set()
                for x in v:
                    c = _canon(x)
                    if c in seen:
                        errors.append("%s: items are not unique (%s)" % (where, c))
                        break
                    seen.add(c)
            if "items" in s:
                for i, x in enumerate(v):
                    self._validate(s["items"], x, "%s[%d]" % (where, i), errors,
                                   warnings)
        if isinstance(v, dict):
            self._object(s, v, where, errors, warnings)
        if "allOf" in s:
            for sub in s["allOf"]:
                self._validate(sub, v, where, errors, warnings)
        if "anyOf" in s:
            self._alternatives(s["anyOf"], v, where, errors, warnings, one=False)
        if "oneOf" in s:
            self._alternatives(s["oneOf"], v, where, errors, warnings, one=True)

    def _format(self, s, v, where, errors):
        fmt = s.get("format")
        if fmt is None:
            return
        if fmt == "uuid" and isinstance(v, str) and not _UUID.match(v):
            errors.append("%s: %r is not a UUID" % (where, v))
        elif fmt in _UINT_MAX and isinstance(v, int) and not isinstance(v, bool):
            if v < 0 or v > _UINT_MAX[fmt]:
                errors.append("%s: %r is out of %s range" % (where, v, fmt))
        elif fmt == "int64" and isinstance(v, int) and not isinstance(v, bool):
            if v < _INT64[0] or v > _INT64[1]:
                errors.append("%s: %r is out of int64 range" % (where, v))
        elif fmt == "date-time" and isinstance(v, str) and not _DATE_TIME.match(v):
            errors.append("%s: %r is not an RFC 3339 date-time" % (where, v))
        # float, double, uri, partial-date-time: no further constraint.

    def _object(self, s, v, where, errors, warnings):
        props = s.get("properties", {})
        for r in s.get("required", []):
            if r not in v:
                errors.append("%s: missing required property %r" % (where, r))
        extra = s.get("additionalProperties")
        for k, x in v.items():
            at = "%s.%s" % (where, k)
            if k in props:
                self._validate(props[k], x, at, errors, warnings)
            elif extra is False:
                errors.append("%s: property not allowed" % at)
            elif isinstance(extra, dict):
                self._validate(extra, x, at, errors, warnings)
            elif extra is None and props:
                warnings.append("%s: property not declared by the schema" % at)

    def _alternatives(self, subs, v, where, errors, warnings, one):
        good = []
        first_errors, first_key = None, None
        for sub in subs:
            e, w = self.validate(sub, v, where)
            if not e:
                good.append(w)
                continue
            # Report the alternative that got furthest: fewest errors,
            # then the deepest one (a bad point id inside a list of points
            # says more than "this is not the batch form").
            key = (len(e), -max(x.split(":")[0].count(".") + x.split(":")[0].count("[")
                                for x in e))
            if first_key is None or key < first_key:
                first_errors, first_key = e, key
        if not good:
            errors.append("%s: matches none of the %d alternatives (closest: %s)" %
                          (where, len(subs), "; ".join((first_errors or [])[:3])))
        elif one and len(good) > 1:
            errors.append("%s: matches %d alternatives of a oneOf" %
                          (where, len(good)))
        else:
            warnings.extend(min(good, key=len))

    # ---- operations ----------------------------------------------------------

    def match(self, method, path):
        """(template, operation, {param: value}) or None."""
        for rx, tmpl, names, ops in self._templates:
            m = rx.match(path)
            if m and method.lower() in ops:
                params = {n: urllib.parse.unquote(g)
                          for n, g in zip(names, m.groups())}
                return tmpl, ops[method.lower()], params
        return None

    def _param_value(self, schema, text, where, errors, warnings):
        s = self.resolve(schema["$ref"]) if "$ref" in schema else schema
        t = s.get("type")
        value = text
        if t == "boolean":
            if text not in ("true", "false"):
                errors.append("%s: %r is not true or false" % (where, text))
                return
            value = text == "true"
        elif t == "integer":
            try:
                value = int(text)
            except ValueError:
                errors.append("%s: %r is not an integer" % (where, text))
                return
        self._validate(schema, value, where, errors, warnings)

    def check_request(self, method, path, query, body):
        """(errors, warnings) for one request. query: the raw query string;
        body: the parsed JSON body, or None when there was none."""
        errors, warnings = [], []
        m = self.match(method, path)
        if m is None:
            return ["%s %s: no such operation in the contract" % (method, path)], []
        tmpl, op, pparams = m
        declared = {p["name"]: p for p in op.get("parameters", [])}
        for name, value in pparams.items():
            p = declared.get(name)
            if p:
                self._param_value(p["schema"], value, "path." + name, errors,
                                  warnings)
        given = urllib.parse.parse_qs(query, keep_blank_values=True)
        for name, values in given.items():
            p = declared.get(name)
            if not p or p.get("in") != "query":
                errors.append("query.%s: not a parameter of %s %s" %
                              (name, method, tmpl))
                continue
            for value in values:
                self._param_value(p["schema"], value, "query." + name, errors,
                                  warnings)
        for name, p in declared.items():
            if p.get("in") == "query" and p.get("required") and name not in given:
                errors.append("query.%s: required" % name)
        rb = op.get("requestBody")
        if rb:
            schema = rb.get("content", {}).get("application/json", {}).get("schema")
            if body is None:
                if rb.get("required"):
                    errors.append("body: required")
            elif schema is not None:
                e, w = self.validate(schema, body, "body")
                errors += e
                warnings += w
        elif body is not None:
            errors.append("body: %s %s takes no body" % (method, tmpl))
        return errors, warnings

    def check_response(self, method, path, status, body):
        """Errors of a JSON answer against the documented response."""
        m = self.match(method, path)
        if m is None:
            return []
        resp = m[1].get("responses", {})
        r = (resp.get(str(status)) or resp.get("%dXX" % (status // 100)) or
             resp.get("default"))
        if r is None:
            return ["status %d is not documented for %s %s" % (status, method, m[0])]
        schema = r.get("content", {}).get("application/json", {}).get("schema")
        if schema is None:
            return []
        return self.validate(schema, body, "response")[0]
