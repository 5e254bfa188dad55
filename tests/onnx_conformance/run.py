#!/usr/bin/env python3
# ONNX conformance: generates onnx 1.12's node test cases, runs each through
# cge.InferenceSession in worker processes (a crash or hang costs one case,
# not the run), compares with the expected outputs, prints a per-op table and
# "N passed, M failed", and fails if any case named in the committed passing
# list does not pass (a count could hide one regression behind one new pass).
"""Usage: run.py [--jobs N] [--passing FILE [--update]] [--filter REGEX] [--json OUT] [-v]"""
import argparse
import collections
import json
import os
import pickle
import queue
import re
import select
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
CASE_TIMEOUT_S = 120
# Operators whose outputs are random draws: onnx's expected values come from
# numpy's generator, so a match is luck (test_bernoulli matched now and then,
# which a gate must not count). Their cases run, dtype and shape are checked,
# and they are reported apart, never as passing.
RANDOM_OPS = {"Bernoulli"}


def restore_numpy_aliases():
    # onnx 1.12's generators use aliases numpy has since removed.
    import warnings
    import numpy as np
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, value in (("float", float), ("int", int), ("bool", bool), ("object", object)):
            try:
                getattr(np, name)
            except AttributeError:
                setattr(np, name, value)


def collect_cases():
    """[(name, op_type, model_bytes, inputs, outputs, rtol, atol)] for every node case."""
    restore_numpy_aliases()
    import onnx.backend.test.case.node as node_cases
    op_of = {}
    original = node_cases.expect

    def expect(node, inputs, outputs, name, **kwargs):
        before = len(node_cases._NodeTestCases)
        original(node, inputs, outputs, name, **kwargs)
        for case in node_cases._NodeTestCases[before:]:
            op_of[case.name] = node.op_type
    # The case modules bind `expect` when imported, so patch before importing.
    node_cases.expect = expect
    cases = node_cases.collect_testcases(None)
    out = []
    seen = collections.Counter()
    for c in cases:
        seen[c.name] += 1
        # Two generators in onnx 1.12 reuse a name (test_resize_tf_crop_and_resize,
        # test_reduce_sum_negative_axes_keepdims_random): keep both, told apart.
        # The passing list can name "__2" because the order is fixed: modules
        # load sorted, exporters run in definition order, each reseeded.
        name = c.name if seen[c.name] == 1 else "%s__%d" % (c.name, seen[c.name])
        inputs, outputs = c.data_sets[0]
        g = c.model.graph
        init = {t.name for t in g.initializer}
        in_names = [vi.name for vi in g.input if vi.name not in init]
        out_names = [vi.name for vi in g.output]
        out.append(dict(name=name, op=op_of.get(c.name, "?"), model=c.model.SerializeToString(),
                        inputs=list(zip(in_names, inputs)), outputs=list(zip(out_names, outputs)),
                        rtol=c.rtol, atol=c.atol, unsupported=unsupported_reason(c.model, inputs,
                                                                                  outputs),
                        random=op_of.get(c.name) in RANDOM_OPS))
    return out


def unsupported_reason(model, inputs, outputs):
    """Why a case needs a value type cge does not have (None if it does not).
    Sequences and optionals of tensors and string tensors are cge value types
    (issue 13); maps and sparse tensors are not."""
    kinds = {"map_type": "map", "sparse_tensor_type": "sparse tensor"}
    for vi in list(model.graph.input) + list(model.graph.output):
        which = vi.type.WhichOneof("value")
        if which in kinds:
            return kinds[which] + " type"
    return None


# ---- worker -------------------------------------------------------------------------

def check_outputs(expected, got, rtol, atol, values=True):
    import numpy as np
    if len(got) != len(expected):
        return "%d outputs; expected %d" % (len(got), len(expected))
    for (name, ref), out in zip(expected, got):
        # Sequences come back as lists, optionals without a value as None.
        if ref is None or out is None:
            if ref is not None or out is not None:
                return "output '%s': %s; expected %s" % (
                    name, "None" if out is None else "a value", "None" if ref is None else "a value")
            continue
        if isinstance(ref, (list, tuple)) or isinstance(out, list):
            if not isinstance(ref, (list, tuple)) or not isinstance(out, list):
                return "output '%s': a %s; expected a %s" % (
                    name, "list" if isinstance(out, list) else "tensor",
                    "list" if isinstance(ref, (list, tuple)) else "tensor")
            why = check_outputs([("%s[%d]" % (name, i), r) for i, r in enumerate(ref)], out,
                                rtol, atol, values)
            if why:
                return "output '%s': %s" % (name, why)
            continue
        ref = np.asarray(ref)
        if out.dtype != ref.dtype:
            return "output '%s': dtype %s; expected %s" % (name, out.dtype, ref.dtype)
        if out.shape != ref.shape:
            return "output '%s': shape %s; expected %s" % (name, out.shape, ref.shape)
        if not values:
            continue
        if ref.dtype.kind in "fc":
            try:
                np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
            except AssertionError as e:
                lines = [l for l in str(e).splitlines() if "Mismatched" in l or "Max abs" in l]
                return "output '%s': values differ (%s)" % (name, "; ".join(lines)[:200])
        elif not np.array_equal(out, ref):
            return "output '%s': values differ" % name
    return None


def run_case(path):
    with open(path, "rb") as f:
        case = pickle.load(f)
    import cge
    try:
        sess = cge.InferenceSession(case["model"])
        got = sess.run([n for n, _ in case["outputs"]], dict(case["inputs"]))
    except cge.Error as e:
        return {"status": "error", "layer": e.layer, "message": str(e)}
    why = check_outputs(case["outputs"], got, case["rtol"], case["atol"], not case["random"])
    if why:
        return {"status": "wrong", "layer": "result", "message": why}
    if case["random"]:
        return {"status": "random", "layer": "result",
                "message": "random outputs: dtype and shape match, values are not comparable"}
    return {"status": "pass"}


def worker_main():
    sys.path.insert(0, os.path.join(ROOT, "python"))
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        try:
            res = run_case(path)
        except Exception as e:  # a bug in the binding or the harness: a failed case
            res = {"status": "error", "layer": "python", "message": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(res) + "\n")
        sys.stdout.flush()


# ---- parent -------------------------------------------------------------------------

class Worker:
    def __init__(self):
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1)

    def run(self, path):
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        try:
            self.proc.stdin.write(path + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            return self.crashed()
        ready, _, _ = select.select([self.proc.stdout], [], [], CASE_TIMEOUT_S)
        if not ready:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return {"status": "crash", "layer": "timeout",
                    "message": "no answer within %d s (killed)" % CASE_TIMEOUT_S}
        line = self.proc.stdout.readline()
        if not line:
            return self.crashed()
        return json.loads(line)

    def crashed(self):
        rc = self.proc.wait()
        self.proc = None
        sig = -rc if rc < 0 else None
        return {"status": "crash", "layer": "crash",
                "message": "worker died (%s)" % ("signal %d" % sig if sig else "exit %d" % rc)}

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()


def first_line(msg):
    return msg.splitlines()[0] if msg else ""


def reason_of(res):
    m = res.get("message", "")
    if res["layer"] == "converter":
        op = re.search(r"unsupported operator '([^']+)'", m)
        if op:
            return "[converter] unsupported operator %s" % op.group(1)
    if res["status"] == "wrong":
        return "wrong result: " + re.sub(r"'[^']*'", "'…'", m.split(":")[1] if ":" in m else m).strip()[:60]
    return re.sub(r"'[^']*'", "'…'", first_line(m))[:100]


def read_passing(path):
    """The case names listed in path: one a line; blank lines and '#' comments ignored."""
    with open(path) as f:
        names = [l.split("#", 1)[0].strip() for l in f]
    return [n for n in names if n]


PASSING_HEADER = ("# onnx 1.12 node test cases that must pass (run.py --passing fails naming\n"
                  "# any that does not). One name a line, sorted; `make conformance-update`\n"
                  "# rewrites it from a run, so new passes are added on purpose.\n")


def write_passing(path, names):
    with open(path, "w") as f:
        f.write(PASSING_HEADER + "".join(n + "\n" for n in sorted(names)))


def check_passing(path, cases, results, filt, update):
    """Every case the list names must pass. With --filter, only the listed
    names the filter selects are checked (and rewritten by --update)."""
    if not os.path.exists(path) and not update:
        print("FAIL: %s does not exist (write it with --update)" % path)
        return 1
    listed = read_passing(path) if os.path.exists(path) else []
    if listed != sorted(set(listed)):
        print("FAIL: %s is not sorted or names a case twice (rewrite it with --update)" % path)
        if not update:
            return 1
    listed = set(listed)
    in_scope = {n for n in listed if not filt or re.search(filt, n)}
    passing = {c["name"] for c in cases if results[c["name"]]["status"] == "pass"}
    known = {c["name"] for c in cases}
    lost = sorted(in_scope - passing)
    new = sorted(passing - listed)
    if update:
        write_passing(path, (listed - in_scope) | passing)
        print("%s: %d names written (%d added, %d removed)" % (
            path, len((listed - in_scope) | passing), len(new), len(lost)))
        for n in new:
            print("  + " + n)
        for n in lost:
            print("  - " + n)
        return 0
    if new:
        print("%d cases pass that %s does not list (add them on purpose: run.py --passing %s "
              "--update):" % (len(new), path, path))
        for n in new:
            print("  NEW  " + n)
    if lost:
        print("FAIL: %d of the %d cases %s lists do not pass:" % (len(lost), len(in_scope), path))
        for n in lost:
            if n not in known:
                why = "no such case in onnx's node tests (renamed or removed?)"
            else:
                r = results[n]
                why = "%s: %s" % (r["status"], first_line(r.get("message", "")))
            print("  LOST %s: %s" % (n, why))
        return 1
    print("%s: all %d listed cases pass" % (path, len(in_scope)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--passing", help="fail unless every case named in this file (one a line) "
                    "passes; report cases that pass and are not named there")
    ap.add_argument("--update", action="store_true",
                    help="rewrite --passing with the cases that pass (within --filter)")
    ap.add_argument("--filter", help="only cases whose name matches this regex")
    ap.add_argument("--json", help="write every case's result here")
    ap.add_argument("--verbose", "-v", action="store_true", help="print every failure")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker_main()
    if args.update and not args.passing:
        ap.error("--update needs --passing FILE")

    t0 = time.time()
    cases = collect_cases()
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c["name"])]
    results = {}
    tmp = tempfile.mkdtemp(prefix="cge_conformance_")
    todo = queue.Queue()
    for c in cases:
        if c["unsupported"]:
            results[c["name"]] = {"status": "unsupported", "layer": "type",
                                  "message": "needs " + c["unsupported"]}
            continue
        path = os.path.join(tmp, c["name"] + ".pkl")
        with open(path, "wb") as f:
            pickle.dump(c, f)
        todo.put((c["name"], path))
    t_gen = time.time() - t0

    def drain():
        w = Worker()
        while True:
            try:
                name, path = todo.get_nowait()
            except queue.Empty:
                break
            results[name] = w.run(path)
            os.unlink(path)
        w.stop()

    threads = [threading.Thread(target=drain) for _ in range(max(1, args.jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.rmdir(tmp)

    per_op = collections.OrderedDict()
    for c in sorted(cases, key=lambda c: c["op"]):
        p, f = per_op.get(c["op"], (0, 0))
        ok = results[c["name"]]["status"] == "pass"
        per_op[c["op"]] = (p + ok, f + (not ok))
    print("%-28s %6s %6s" % ("operator", "passed", "failed"))
    for op, (p, f) in per_op.items():
        print("%-28s %6d %6d" % (op, p, f))

    reasons = collections.Counter()
    unsupported = collections.defaultdict(list)
    crashes = []
    random_ran = []
    for c in cases:
        r = results[c["name"]]
        if r["status"] == "unsupported":
            unsupported[r["message"]].append(c["name"])
        elif r["status"] == "random":
            random_ran.append(c["name"])
        elif r["status"] == "crash":
            crashes.append("%s: %s" % (c["name"], r["message"]))
        elif r["status"] != "pass":
            reasons[reason_of(r)] += 1
            if args.verbose:
                print("FAIL %s: %s" % (c["name"], first_line(r["message"])))
    print("\nunsupported value types (cases listed by reason):")
    for why, names in sorted(unsupported.items()):
        print("  %s (%d): %s" % (why, len(names), " ".join(sorted(names))))
    if random_ran:
        print("\nrandom outputs (%s; ran, dtype and shape as expected; not counted as passing) "
              "(%d): %s" % (", ".join(sorted(RANDOM_OPS)), len(random_ran),
                            " ".join(sorted(random_ran))))
    print("\nfailures by reason:")
    for why, n in reasons.most_common():
        print("  %4d  %s" % (n, why))
    if crashes:
        print("\ncrashes and timeouts:")
        for line in crashes:
            print("  " + line)
    passed = sum(1 for r in results.values() if r["status"] == "pass")
    failed = len(results) - passed
    print("\n%d passed, %d failed (%d unsupported types, %d random, %d crashes) of %d cases in "
          "%.1f s (generation %.1f s)" % (passed, failed, sum(len(v) for v in unsupported.values()),
                                          len(random_ran), len(crashes), len(results),
                                          time.time() - t0, t_gen))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({c["name"]: dict(results[c["name"]], op=c["op"]) for c in cases}, f,
                      indent=1)
    status = 0
    if args.passing:
        status = check_passing(args.passing, cases, results, args.filter, args.update)
    if crashes:
        print("FAIL: %d cases crashed or hung" % len(crashes))
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
