"""scripts/zoo_guard.py: the committed zoo table is written, read back, merged
with a partial run, and a model that got slower, bigger or stopped matching
is reported (exit status 1)."""
import json
import os
import subprocess
import sys

GUARD = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "zoo_guard.py")


def _row(name, cge_ms, ort_ms, rss=(50.0, 100.0), create=(10.0, 20.0), ok=True):
    return {"name": name, "opset": 14, "group": "t", "dynamic": False, "seconds": 1.0,
            "cge": {"median_ms": cge_ms, "rss_mb": rss[0], "create_ms": create[0],
                    "err": {"ok": ok, "abs": 0.0, "rel": 0.0, "why": "" if ok else "mismatch"},
                    "err_ort": {"ok": ok, "abs": 0.0, "rel": 0.0, "why": ""}},
            "ort": {"median_ms": ort_ms, "rss_mb": rss[1], "create_ms": create[1],
                    "err": {"ok": True, "abs": 0.0, "rel": 0.0, "why": ""}}}


def _guard(tmp_path, rows, *extra):
    run = tmp_path / ("run%d.json" % len(list(tmp_path.iterdir())))
    run.write_text(json.dumps(rows))
    p = subprocess.run([sys.executable, GUARD, "--json", str(run),
                        "--table", str(tmp_path / "figures.md")] + list(extra),
                       capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def _table_rows(tmp_path):
    lines = (tmp_path / "figures.md").read_text().splitlines()
    return {l.split("|")[1].strip(): l for l in lines
            if l.startswith("| ") and not l.startswith("| model ")}


def test_write_then_compare_flags_only_what_got_worse(tmp_path):
    base = [_row("a", 10.0, 10.0), _row("b", 5.0, 10.0), _row("c", 1.0, 1.0),
            {"name": "d", "opset": 14, "export_error": "cannot export", "seconds": 0.1}]
    rc, out = _guard(tmp_path, base, "--write")
    assert rc == 0, out
    rows = _table_rows(tmp_path)
    assert sorted(rows) == ["a", "b", "c", "d"]
    assert "| 0.50 |" in rows["b"] and "export fails" in rows["d"]
    text = (tmp_path / "figures.md").read_text()
    assert "Geometric mean cge/ORT time: 0.79" in text  # (1 * 0.5 * 1) ** (1/3)

    # a: 2x slower; b: within tolerance; c: stops matching.
    rc, out = _guard(tmp_path, [_row("a", 20.0, 10.0), _row("b", 5.5, 10.0),
                                _row("c", 1.0, 1.0, ok=False)])
    assert rc == 1, out
    assert "worse: a: time cge/ORT 2.00, was 1.00" in out
    assert "worse: c: FAIL, was pass" in out
    assert "worse: b" not in out
    # Without --write the table is unchanged.
    assert "| 1.00 |" in _table_rows(tmp_path)["a"]


def test_partial_run_replaces_only_its_rows(tmp_path):
    _guard(tmp_path, [_row("a", 10.0, 10.0), _row("b", 5.0, 10.0)], "--write")
    before = _table_rows(tmp_path)
    rc, out = _guard(tmp_path, [_row("b", 4.0, 10.0, rss=(200.0, 100.0))], "--write",
                     "--note", "loaded")
    assert rc == 1 and "worse: b: rss cge/ORT 2.00, was 0.50" in out, out
    after = _table_rows(tmp_path)
    assert after["a"] == before["a"]
    assert "| 0.40 |" in after["b"] and "loaded" in after["b"]


def test_bad_input_is_an_error_not_a_crash(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = subprocess.run([sys.executable, GUARD, "--json", str(bad),
                        "--table", str(tmp_path / "figures.md")], capture_output=True, text=True)
    assert p.returncode == 2 and "[zoo_guard] cannot read" in p.stderr
    bad.write_text(json.dumps({"name": "x"}))
    p = subprocess.run([sys.executable, GUARD, "--json", str(bad),
                        "--table", str(tmp_path / "figures.md")], capture_output=True, text=True)
    assert p.returncode == 2 and "expected a list" in p.stderr
    assert not (tmp_path / "figures.md").exists()
