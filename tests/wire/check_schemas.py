#!/usr/bin/env python3
"""Wire evolution, enforced (docs/formats.md, "Versioning rules").

1. Every schema in schemas/ is an evolution of the snapshot of the current
   protocol version (schemas/snapshots/v<kProtocolVersion>/, the schemas as
   that version was released): `flatc --conform` (no field re-typed or
   re-numbered), and by this script's own reading, no field removed (a field
   that goes stays, marked `deprecated`), no id reused, no MessageKind value
   changed or removed. A change that breaks one of these fails here unless
   kProtocolVersion (common/net/frame.h) is bumped and a snapshot for the new
   version committed.
2. docs/formats.md describes every MessageKind with its value and every
   field of every table, in the table rows that name the table.
3. The check itself: a copy of the schemas with one field re-typed must fail
   step 1 (shows the check can fail).

Usage: check_schemas.py [--repo DIR] [--flatc PATH]; exit 0 when all hold.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

FIELD = re.compile(r"^\s*(\w+)\s*:\s*([\[\]\w.]+)(?:\s*=\s*[^(;]+)?\s*\(([^)]*)\)\s*;", re.M)
TABLE = re.compile(r"^(table|struct)\s+(\w+)\s*\{(.*?)\}", re.M | re.S)  # no braces inside
ENUM = re.compile(r"^enum\s+(\w+)\s*:\s*\w+\s*\{(.*?)\}", re.M | re.S)


def strip_comments(text):
    return re.sub(r"//[^\n]*", "", text)


def parse(path):
    """{table: {field: (type, id, deprecated)}}, {enum: {name: value}} of one .fbs file."""
    text = strip_comments(open(path).read())
    tables, enums = {}, {}
    for _, name, body in TABLE.findall(text):
        fields = {}
        for fname, ftype, attrs in FIELD.findall(body):
            m = re.search(r"\bid\s*:\s*(\d+)", attrs)
            if not m:
                raise SystemExit(f"{path}: table {name} field {fname} has no explicit id (every field needs one)")
            fields[fname] = (ftype, int(m.group(1)), "deprecated" in attrs)
        tables[name] = fields
    for name, body in ENUM.findall(text):
        values, nxt = {}, 0
        for item in body.split(","):
            item = item.strip()
            if not item:
                continue
            if "=" in item:
                k, v = (x.strip() for x in item.split("="))
                nxt = int(v)
            else:
                k = item
            values[k] = nxt
            nxt += 1
        enums[name] = values
    return tables, enums


def schema_files(d):
    return sorted(f for f in os.listdir(d) if f.endswith(".fbs"))


def protocol_version(repo):
    text = open(os.path.join(repo, "common", "net", "frame.h")).read()
    m = re.search(r"kProtocolVersion\s*=\s*(\d+)", text)
    if not m:
        raise SystemExit("common/net/frame.h: no kProtocolVersion")
    return int(m.group(1))


def check_evolution(schemas, snapshot, flatc):
    """Problems of `schemas` as an evolution of `snapshot` (both directories)."""
    problems = []
    old_files, new_files = schema_files(snapshot), schema_files(schemas)
    for f in old_files:
        if f not in new_files:
            problems.append(f"{f}: the schema is gone (schemas are never removed)")
    with tempfile.TemporaryDirectory() as out:
        for f in new_files:
            if f not in old_files:
                continue  # a new schema evolves nothing
            r = subprocess.run([flatc, "--conform", os.path.join(snapshot, f), "--conform-includes", snapshot, "-I",
                                schemas, "-o", out, os.path.join(schemas, f)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                problems.append(f"{f}: flatc --conform: " + " ".join(r.stdout.split()))
    for f in old_files:
        if f not in new_files:
            continue
        old_t, old_e = parse(os.path.join(snapshot, f))
        new_t, new_e = parse(os.path.join(schemas, f))
        for table, fields in old_t.items():
            if table not in new_t:
                problems.append(f"{f}: table {table} is gone")
                continue
            for name, (ftype, fid, _) in fields.items():
                now = new_t[table].get(name)
                if now is None:
                    problems.append(f"{f}: {table}.{name} (id {fid}) is gone: keep it, marked (deprecated)")
                elif now[0] != ftype or now[1] != fid:
                    problems.append(f"{f}: {table}.{name} was {ftype} (id {fid}), is {now[0]} (id {now[1]})")
            ids = {}
            for name, (_, fid, _) in new_t[table].items():
                if fid in ids:
                    problems.append(f"{f}: {table} gives id {fid} to {ids[fid]} and {name}")
                ids[fid] = name
        for enum, values in old_e.items():
            for name, v in values.items():
                if new_e.get(enum, {}).get(name) != v:
                    problems.append(f"{f}: {enum}.{name} = {v} changed or is gone (enum values are only appended)")
    return problems


def check_docs(schemas, doc_path):
    """Problems of docs/formats.md against the schemas."""
    doc = open(doc_path).read()
    rows = [l for l in doc.splitlines() if l.startswith("|")]
    problems = []
    tables, kinds = {}, {}
    for f in schema_files(schemas):
        t, e = parse(os.path.join(schemas, f))
        tables.update(t)
        kinds.update(e.get("MessageKind", {}))
    for name, value in kinds.items():
        if name == "None":
            continue
        if not any(re.search(rf"\|\s*{name}\s*\|\s*{value}\s*\|", r) or re.search(rf"`{name}` \({value}\)", r)
                   for r in rows):
            problems.append(f"docs/formats.md: MessageKind {name} = {value} is in no table row "
                            f"('| {name} | {value} |', or '`{name}` ({value})' in a reply column)")
    for table, fields in tables.items():
        mine = [r for r in rows if re.search(rf"\b{table}\b", r)]
        if not mine:
            problems.append(f"docs/formats.md: table {table} is in no table row")
            continue
        text = " ".join(mine)
        for name, (_, _, deprecated) in fields.items():
            if not deprecated and not re.search(rf"`{name}\b", text) and not re.search(rf"[{{,]\s*{name}\b", text):
                problems.append(f"docs/formats.md: {table}.{name} is not described in the rows that name {table}")
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--flatc", default="flatc")
    a = ap.parse_args()
    schemas = os.path.join(a.repo, "schemas")
    version = protocol_version(a.repo)
    snapshot = os.path.join(schemas, "snapshots", f"v{version}")
    failed = False
    if not os.path.isdir(snapshot):
        print(f"FAIL: no snapshot of protocol version {version} ({snapshot}): a version bump commits the schemas "
              f"it releases there (cp schemas/*.fbs {os.path.relpath(snapshot, a.repo)}/)")
        failed = True
    else:
        problems = check_evolution(schemas, snapshot, a.flatc)
        for p in problems:
            print(f"FAIL: {p}: bump kProtocolVersion (common/net/frame.h) and snapshot the schemas, or undo the change")
        failed |= bool(problems)
        print(f"schemas/ against snapshot v{version}: {len(problems)} problem(s)")
        # The check must be able to fail: re-type one field of a copy.
        with tempfile.TemporaryDirectory() as tmp:
            for f in schema_files(schemas):
                shutil.copy(os.path.join(schemas, f), tmp)
            path = os.path.join(tmp, "rpc.fbs")
            text = open(path).read()
            broken = text.replace("code: int (id: 0);", "code: long (id: 0);", 1)
            if broken == text:
                print("FAIL: the self-check found no ErrorReply.code to re-type")
                failed = True
            else:
                open(path, "w").write(broken)
                caught = check_evolution(tmp, snapshot, a.flatc)
                print("self-check, ErrorReply.code re-typed int -> long: " +
                      ("rejected: " + "; ".join(caught) if caught else "NOT rejected"))
                failed |= not caught
    doc_problems = check_docs(schemas, os.path.join(a.repo, "docs", "formats.md"))
    for p in doc_problems:
        print(f"FAIL: {p}")
    print(f"docs/formats.md against schemas/: {len(doc_problems)} problem(s)")
    failed |= bool(doc_problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
