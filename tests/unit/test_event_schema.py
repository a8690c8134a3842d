#!/usr/bin/env python3
"""The events topic's schema (schemas/kafka/event.v1.json) and its
compatibility: every field frozen in event.v1.fields.json is still in
event.v1.json and in every later event.vN.json, with the same JSON types
(a field removed, or its type changed, fails); every schema's examples and
an event of every type the C encoder writes (test_event --print) validate
against the newest schema.  Python's standard library only: the validator
below knows the keywords these schemas use.

usage: test_event_schema.py SCHEMA_DIR TEST_EVENT_BINARY"""
import glob
import json
import os
import re
import subprocess
import sys

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        FAILS.append(what)


def json_types(prop):
    """The JSON types a property allows, sorted."""
    if "const" in prop:
        v = prop["const"]
        return ["integer" if isinstance(v, int) else "string"]
    t = prop.get("type")
    return sorted(t if isinstance(t, list) else [t])


def type_ok(v, t):
    return {"integer": isinstance(v, int) and not isinstance(v, bool),
            "string": isinstance(v, str), "null": v is None,
            "boolean": isinstance(v, bool), "object": isinstance(v, dict)}[t]


def validate(schema, doc):
    """The list of what DOC breaks of SCHEMA (an object schema of scalars)."""
    errs = []
    if not isinstance(doc, dict):
        return ["not an object"]
    props = schema["properties"]
    for name in schema.get("required", []):
        if name not in doc:
            errs.append("missing " + name)
    for name, v in doc.items():
        p = props.get(name)
        if p is None:
            if not schema.get("additionalProperties", True):
                errs.append("unknown field " + name)
            continue
        if "const" in p and v != p["const"]:
            errs.append("%s is not %r" % (name, p["const"]))
        if not any(type_ok(v, t) for t in json_types(p)):
            errs.append("%s has the wrong type" % name)
            continue
        if isinstance(v, int) and not isinstance(v, bool):
            if v < p.get("minimum", v) or v > p.get("maximum", v):
                errs.append("%s out of range" % name)
        if isinstance(v, str):
            if "pattern" in p and not re.search(p["pattern"], v):
                errs.append("%s does not match %s" % (name, p["pattern"]))
            if len(v) > p.get("maxLength", len(v)):
                errs.append("%s too long" % name)
    return errs


def compat_errors(schema, frozen):
    """What SCHEMA breaks of the FROZEN fields: one removed, or its types."""
    props = schema["properties"]
    errs = []
    for field, types in frozen.items():
        if field not in props:
            errs.append("drops " + field)
        elif json_types(props[field]) != sorted(types):
            errs.append("%s is %s, was %s" % (field, json_types(props[field]), types))
    return errs


def version(path):
    return int(re.search(r"event\.v(\d+)\.json$", path).group(1))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    sdir, binary = sys.argv[1:]
    with open(os.path.join(sdir, "event.v1.fields.json")) as f:
        frozen = json.load(f)["fields"]
    paths = sorted((p for p in glob.glob(os.path.join(sdir, "event.v*.json"))
                    if re.search(r"event\.v\d+\.json$", p)), key=version)
    check(paths and version(paths[0]) == 1, "event.v1.json exists")
    for path in paths:
        with open(path) as f:
            schema = json.load(f)
        name = os.path.basename(path)
        errs = compat_errors(schema, frozen)
        check(not errs, "%s keeps every field of v1 with its type %s" % (name, errs))
        for i, ex in enumerate(schema.get("examples", [])):
            errs = validate(schema, ex)
            check(not errs, "%s example %d validates %s" % (name, i, errs))
    with open(paths[-1]) as f:
        newest = json.load(f)
    out = subprocess.run([binary, "--print"], capture_output=True, text=True, timeout=30)
    check(out.returncode == 0, "test_event --print runs")
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    check(len(lines) >= 9, "an event of every type (%d)" % len(lines))
    types = set()
    for line in lines:
        doc = json.loads(line)
        types.add(doc["type"])
        errs = validate(newest, doc)
        check(not errs, "the encoder's %s event validates %s" % (doc["type"], errs))
    # The check itself must be able to fail: a field dropped, a type changed.
    dropped = json.loads(json.dumps(newest))
    del dropped["properties"]["uid"]
    check(compat_errors(dropped, frozen) == ["drops uid"], "a dropped field fails the check")
    changed = json.loads(json.dumps(newest))
    changed["properties"]["attempt"]["type"] = "string"
    check(len(compat_errors(changed, frozen)) == 1, "a changed type fails the check")
    nullable = json.loads(json.dumps(newest))
    nullable["properties"]["uid"]["type"] = ["integer", "null"]
    check(len(compat_errors(nullable, frozen)) == 1, "a type widened to null fails the check")
    check(validate(newest, dict(json.loads(lines[0]), attempt="1")) != [],
          "a value of the wrong type is refused")
    print("%d failed" % len(FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
