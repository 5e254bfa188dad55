#!/usr/bin/env python3
"""The zoo's regression guard: keeps docs/zoo_figures.md, the committed table of
every zoo model's cge/ORT time, peak-memory and session-creation ratios, and
says which models got worse since the table was last written.

Usage: zoo_guard.py --json RUN.json [--table docs/zoo_figures.md] [--write]
                    [--tolerance 0.25] [--note TEXT]

RUN.json is what `scripts/zoo.py --json` writes (all models or a filtered
subset). Each model of the run is compared with its row in the table: a time
or RSS ratio more than TOLERANCE above the committed one, a creation ratio
more than 2*TOLERANCE above it (creation is the noisiest figure), or a model
that matched before and no longer does, is listed as a regression. --write
replaces the run's rows in the table (the other rows are kept, with the date
they were measured) and rewrites its summary. Exit status 1 when a regression
was listed, so a script can stop on it; `make zoo` prints the list and goes on.
"""
import argparse
import datetime
import json
import math
import os
import sys

HEADER = ("| model | status | cge ms | ORT ms | time cge/ORT | cge RSS MB | ORT RSS MB"
          " | RSS cge/ORT | cge create ms | ORT create ms | create cge/ORT | measured |")
COLUMNS = ["model", "status", "cge_ms", "ort_ms", "time", "cge_rss", "ort_rss", "rss",
           "cge_create", "ort_create", "create", "measured"]
BEGIN, END = "<!-- zoo-figures:begin -->", "<!-- zoo-figures:end -->"


def _ratio(a, b):
    return a / b if a and b else None


def row_from_run(r, when):
    """One table row (a dict of COLUMNS) from one zoo.py json row."""
    c, o = r.get("cge") or {}, r.get("ort") or {}
    if r.get("export_error"):
        status = "export fails"
    elif not c:
        status = "not run"
    elif "error" in c:
        status = "FAIL"
    elif (c.get("err") or {}).get("ok"):
        status = "pass"
    elif ((c.get("err_ort") or {}).get("ok") and o and "error" not in o
          and not (o.get("err") or {}).get("ok")):
        # zoo.py's rule: ORT differs from PyTorch as much, so the exported
        # graph itself approximates the module.
        status = "pass (as ORT)"
    else:
        status = "FAIL"
    return {
        "model": r["name"], "status": status,
        "cge_ms": c.get("median_ms"), "ort_ms": o.get("median_ms"),
        "time": _ratio(c.get("median_ms"), o.get("median_ms")),
        "cge_rss": c.get("rss_mb"), "ort_rss": o.get("rss_mb"),
        "rss": _ratio(c.get("rss_mb"), o.get("rss_mb")),
        "cge_create": c.get("create_ms"), "ort_create": o.get("create_ms"),
        "create": _ratio(c.get("create_ms"), o.get("create_ms")),
        "measured": when,
    }


def _fmt(key, v):
    if v is None:
        return ""
    if key in ("time", "rss", "create"):
        return "%.2f" % v
    if isinstance(v, float):
        return "%.1f" % v if v < 1000 else "%.0f" % v
    return str(v)


def _parse(key, s):
    s = s.strip()
    if key in ("model", "status", "measured"):
        return s
    return float(s) if s else None


def read_table(path):
    """The rows of the committed table, keyed by model, and the text around it."""
    if not os.path.exists(path):
        return {}, "", ""
    text = open(path).read()
    if BEGIN not in text and END not in text:
        return {}, text, ""  # a new page: the table goes after its text
    if BEGIN not in text or END not in text:
        raise SystemExit("[zoo_guard] %s has one of %s, %s but not both" % (path, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    body, tail = rest.split(END, 1)
    rows = {}
    for line in body.splitlines():
        if not line.startswith("| ") or line.startswith("| model ") or line.startswith("|---"):
            continue
        cells = [x for x in line.strip().strip("|").split("|")]
        if len(cells) != len(COLUMNS):
            raise SystemExit("[zoo_guard] %s: a row has %d cells, expected %d: %s"
                             % (path, len(cells), len(COLUMNS), line))
        row = {k: _parse(k, v) for k, v in zip(COLUMNS, cells)}
        rows[row["model"]] = row
    return rows, head, tail


def _geo(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(rows):
    ok = [r for r in rows.values() if r["status"].startswith("pass")]
    lines = ["%d models; %d match PyTorch (or, marked, ONNX Runtime)." % (len(rows), len(ok))]
    for key, what in (("time", "time"), ("rss", "peak RSS"), ("create", "session creation")):
        g = _geo([r[key] for r in ok])
        worst = sorted((r for r in ok if r[key]), key=lambda r: -r[key])[:8]
        if g:
            lines.append("Geometric mean cge/ORT %s: %.2f. Highest: %s." % (
                what, g, ", ".join("%s %.2f" % (r["model"], r[key]) for r in worst)))
    over = [r["model"] for r in ok if r["time"] and r["time"] > 1.25]
    lines.append("Above 1.25x ORT's time: %s." % (", ".join(over) if over else "none"))
    return "\n\n".join(lines)


def write_table(path, rows, head, tail):
    if not head:
        head = ("# The zoo's figures (written by `make zoo`; compare with `scripts/zoo_guard.py`)\n\n"
                "Each row is one model's latest figures from `scripts/zoo.py` (batch 1, 2 threads,\n"
                "median of the timed runs; ORT is ONNX Runtime in the same process run). See\n"
                "docs/zoo.md for how they are measured. Rows keep the date they were measured.\n\n")
    out = [BEGIN, "", summary(rows), "", HEADER, "|" + "---|" * len(COLUMNS)]
    for name in sorted(rows):
        out.append("| " + " | ".join(_fmt(k, rows[name][k]) for k in COLUMNS) + " |")
    out += ["", END]
    with open(path + ".tmp", "w") as f:
        f.write(head + "\n".join(out) + (tail if tail else "\n"))
    os.replace(path + ".tmp", path)


def regressions(old, new, tol):
    found = []
    for name, n in sorted(new.items()):
        o = old.get(name)
        if not o:
            continue
        if o["status"].startswith("pass") and not n["status"].startswith("pass"):
            found.append("%s: %s, was %s" % (name, n["status"], o["status"]))
            continue
        for key, limit in (("time", tol), ("rss", tol), ("create", 2 * tol)):
            if o[key] and n[key] and n[key] > o[key] * (1 + limit):
                found.append("%s: %s cge/ORT %.2f, was %.2f (%s)" % (name, key, n[key], o[key],
                                                                      o["measured"]))
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--json", required=True, help="rows written by scripts/zoo.py --json")
    ap.add_argument("--table", default=os.path.join(os.path.dirname(__file__), "..", "docs",
                                                    "zoo_figures.md"))
    ap.add_argument("--write", action="store_true", help="store the run's rows in the table")
    ap.add_argument("--tolerance", type=float, default=0.25)
    ap.add_argument("--note", default="", help="appended to each new row's date (e.g. the load)")
    a = ap.parse_args(argv)
    try:
        run = json.load(open(a.json))
    except (OSError, ValueError) as e:
        print("[zoo_guard] cannot read %s: %s" % (a.json, e), file=sys.stderr)
        return 2
    if not isinstance(run, list):
        print("[zoo_guard] %s: expected a list of zoo rows" % a.json, file=sys.stderr)
        return 2
    when = datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M") + (" " + a.note if a.note else "")
    new = {r["name"]: row_from_run(r, when) for r in run if isinstance(r, dict) and "name" in r}
    old, head, tail = read_table(a.table)
    found = regressions(old, new, a.tolerance)
    print("[zoo_guard] %d models in the run, %d in %s" % (len(new), len(old), a.table))
    for line in found:
        print("[zoo_guard] worse: " + line)
    if not found:
        print("[zoo_guard] no model got worse than the committed table (tolerance %.0f%%)"
              % (100 * a.tolerance))
    if a.write:
        merged = dict(old)
        merged.update(new)
        write_table(a.table, merged, head, tail)
        print("[zoo_guard] wrote %s" % a.table)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
