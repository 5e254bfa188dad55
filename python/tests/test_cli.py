# The `cge` command-line tool: every subcommand, its --help, its outputs
# (checked against numpy or against each other) and its bad arguments (exit
# code 2 for a command line that cannot be acted on, 1 for failures while
# working: missing or unreadable files, wrong shapes, corrupt models), with
# the layered error message on stderr.
import json
import os
import subprocess

import numpy as np
import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
SMALL_CNN = os.path.join(ROOT, "models", "small_cnn.onnx")


def _cli_path():
    if os.environ.get("CGE_CLI"):
        return os.environ["CGE_CLI"]
    lib = os.environ.get("CGE_LIBRARY")
    if lib:
        return os.path.join(os.path.dirname(lib), "cge")
    return os.path.join(ROOT, "build", "cge")


CLI = _cli_path()


def cge(*args, rc=0, cwd=None):
    """Run `cge args...`; check the exit code; return (stdout, stderr)."""
    assert os.path.isfile(CLI), "the cge tool is not built at %s" % CLI
    p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                       timeout=600)
    assert p.returncode == rc, "cge %s: exit %d, wanted %d\nstdout: %s\nstderr: %s" % (
        " ".join(map(str, args)), p.returncode, rc, p.stdout, p.stderr)
    return p.stdout, p.stderr


import onnx  # noqa: E402,F401  (required: conftest.REQUIRED)
from onnx import TensorProto, helper  # noqa: E402

W = (np.arange(12, dtype=np.float32).reshape(4, 3) - 5.0) / 7.0
B = np.array([0.5, -0.25, 0.125], np.float32)


def _save(model, path):
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """y = Relu(x @ W + B), x: [N, 4] with N dynamic ('batch')."""
    d = tmp_path_factory.mktemp("cli")
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("W", TensorProto.FLOAT, [4, 3], W.flatten()),
         helper.make_tensor("B", TensorProto.FLOAT, [3], B)])
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), d / "mlp.onnx")


@pytest.fixture(scope="module")
def mlp_cgm(mlp, tmp_path_factory):
    out = tmp_path_factory.mktemp("cgm") / "mlp.cgm"
    stdout, _ = cge("compile", mlp, "-o", out, "--input-shape", "x:2,4")
    assert "->" in stdout and "steps" in stdout
    return str(out)


def ref(x):
    return np.maximum(x @ W + B, 0)


# ---- the tool itself ------------------------------------------------------------


def test_usage_and_version():
    _, err = cge(rc=2)
    assert "usage: cge" in err
    out, _ = cge("--help")
    assert "compile" in out and "profile" in out
    _, err = cge("frobnicate", rc=2)
    assert "unknown command 'frobnicate'" in err
    out, _ = cge("--version")
    assert out.startswith("cge ")


@pytest.mark.parametrize("sub", ["compile", "run", "bench", "inspect", "dot", "profile"])
def test_help_per_subcommand(sub):
    out, _ = cge(sub, "--help")
    assert out.startswith("usage: cge %s" % sub)
    cge(sub, "-h")
    _, err = cge(sub, "--no-such-option", "x.onnx", rc=2)
    assert "unknown option '--no-such-option'" in err and "--help" in err
    _, err = cge(sub, rc=2)
    assert "no MODEL given" in err


# ---- compile ------------------------------------------------------------------------


def test_compile_and_its_bad_arguments(mlp, tmp_path):
    out = tmp_path / "m.cgm"
    stdout, _ = cge("compile", mlp, "-o", out, "--input-shape", "x:3,4", "--opt-level", "1",
                    "--disable-pass", "cse")
    assert out.read_bytes()[:8] == b"CGEMODEL"
    assert stdout.startswith("compiled %s -> %s" % (mlp, out))
    # Dynamic dims stay symbolic: the .cgm serves every size.
    stdout, _ = cge("compile", mlp, "-o", tmp_path / "d.cgm")
    assert "arena per size" in stdout
    _, err = cge("compile", mlp, rc=2)
    assert "give -o" in err
    _, err = cge("compile", tmp_path / "missing.onnx", "-o", out, rc=1)
    assert "[io]" in err and "missing.onnx" in err
    for bad in ("x:2,3a", "x:2,-a", "x", "x:-1,4", ":2,4", "x:1,2,3,4,5,6,7,8,9", "x:2,,4"):
        _, err = cge("compile", mlp, "-o", out, "--input-shape", bad, rc=2)
        assert "--input-shape" in err
    _, err = cge("compile", mlp, "-o", out, "--opt-level", "7", rc=2)
    assert "--opt-level" in err
    _, err = cge("compile", mlp, "-o", out, "--disable-pass", "no_such_pass", rc=2)
    assert "no such pass" in err
    _, err = cge("compile", mlp, "-o", out, "--input-shape", "nope:2,4", rc=1)
    assert "nope" in err
    _, err = cge("compile", mlp, "-o", out, "--input-shape", "x:2,5", rc=1)
    assert err.startswith("cge compile: [")
    _, err = cge("compile", out, "-o", tmp_path / "again.cgm", rc=2)
    assert "already a compiled model" in err
    _, err = cge("compile", mlp, "-o", out, "--input-shape", "x:2,4", "--custom-op-lib",
                 tmp_path / "libnothing.so", rc=1)
    assert "[io]" in err and "libnothing.so" in err
    _, err = cge("compile", mlp, "-o", tmp_path / "no" / "dir" / "m.cgm", "--input-shape",
                 "x:2,4", rc=1)
    assert "[io]" in err
    dump = tmp_path / "dump"
    cge("compile", mlp, "-o", out, "--input-shape", "x:2,4", "--dump", dump)
    assert any(n.endswith("_infer.dot") for n in os.listdir(dump))


def test_compile_keeps_symbolic_dims(mlp, tmp_path):
    """A dim left symbolic, by the model (dim_param) or by --input-shape
    NAME:D0,batch, stays symbolic in the .cgm (model format 2): one compiled
    model runs every size, with the outputs of a compile for that size."""
    x = np.linspace(-2, 2, 28, dtype=np.float32).reshape(7, 4)
    for args, shown in (((), "[batch,4]"), (("--input-shape", "x:n,4"), "[n,4]")):
        out = tmp_path / "sym.cgm"
        stdout, _ = cge("compile", mlp, "-o", out, *args)
        assert out.read_bytes()[:8] == b"CGEMODEL" and "arena per size" in stdout
        stdout, _ = cge("inspect", out)
        assert "format 4" in stdout and shown in stdout, stdout
        for rows in (1, 3, 7, 2, 5):
            np.save(tmp_path / "x.npy", x[:rows])
            got, want = tmp_path / "got", tmp_path / "want"
            cge("run", out, "--input", "x=%s" % (tmp_path / "x.npy"), "--output-dir", got)
            fixed = tmp_path / "fixed.cgm"
            cge("compile", mlp, "-o", fixed, "--input-shape", "x:%d,4" % rows)
            cge("run", fixed, "--input", "x=%s" % (tmp_path / "x.npy"), "--output-dir", want)
            for name in os.listdir(want):
                a, b = np.load(got / name), np.load(want / name)
                assert a.shape == b.shape and a.shape[0] == rows
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        # Random inputs at a size given on the command line; a sweep in one session.
        stdout, _ = cge("run", out, "--input-shape", "x:6,4")
        assert "[6," in stdout, stdout
        stdout, _ = cge("bench", out, "--shapes", "x:1,4;x:4,4;x:2,4", "--iterations", "3")
        assert stdout.count("x:") >= 3, stdout
    # A fixed-shape .cgm takes no --input-shape.
    _, err = cge("run", tmp_path / "fixed.cgm", "--input-shape", "x:6,4", rc=2)
    assert "compiled for fixed input shapes" in err
    _, err = cge("compile", mlp, "-o", tmp_path / "m.cgm", "--input-shape", "nope:batch,4", rc=1)
    assert "--input-shape names 'nope', which is not an input of the model" in err
    # inspect (which compiles) on the .onnx says which inputs need sizes.
    _, err = cge("inspect", mlp, rc=1)
    assert "inputs with dims that are not sizes: 'x' [batch,4]" in err


# ---- run ------------------------------------------------------------------------------


def test_run_cgm_and_onnx_agree_with_numpy(mlp, mlp_cgm, tmp_path):
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    np.save(tmp_path / "x.npy", x)
    outs = {}
    for name, model, extra in (("cgm", mlp_cgm, []), ("onnx", mlp, ["--input-shape", "x:2,4"])):
        for mode in ("eager", "plan", "replay"):
            d = tmp_path / ("%s_%s" % (name, mode))
            stdout, _ = cge("run", model, "--input", "x=%s" % (tmp_path / "x.npy"),
                            "--output-dir", d, "--mode", mode, *extra)
            assert "output 'y': float32 [2,3]" in stdout
            assert "(%s mode" % mode in stdout
            outs[name, mode] = np.load(d / "y.npy")
    for k, v in outs.items():
        np.testing.assert_allclose(v, ref(x), rtol=1e-6, atol=1e-6, err_msg=str(k))
        np.testing.assert_array_equal(v, outs["cgm", "plan"])


def test_run_random_inputs_are_seeded(mlp_cgm, tmp_path):
    a, _ = cge("run", mlp_cgm, "--output-dir", tmp_path / "a")
    b, _ = cge("run", mlp_cgm, "--output-dir", tmp_path / "b")
    c, _ = cge("run", mlp_cgm, "--output-dir", tmp_path / "c", "--seed", 7)
    ya, yb, yc = (np.load(tmp_path / d / "y.npy") for d in "abc")
    np.testing.assert_array_equal(ya, yb)
    assert not np.array_equal(ya, yc)


def test_run_bad_arguments(mlp_cgm, tmp_path):
    good = tmp_path / "x.npy"
    np.save(good, np.zeros((2, 4), np.float32))
    _, err = cge("run", mlp_cgm, "--input", "nope=%s" % good, rc=2)
    assert "no input named 'nope'" in err and "'x'" in err
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % good, "--input", "x=%s" % good, rc=2)
    assert "given twice" in err
    _, err = cge("run", mlp_cgm, "--input", "x", rc=2)
    assert "NAME=FILE.npy" in err
    _, err = cge("run", mlp_cgm, "--mode", "fast", rc=2)
    assert "--mode 'fast'" in err
    _, err = cge("run", mlp_cgm, "--threads", "0", rc=2)
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % (tmp_path / "missing.npy"), rc=1)
    assert "[io]" in err and "missing.npy" in err
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"not numpy at all")
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % junk, rc=1)
    assert "[io]" in err and "not a .npy file" in err
    short = tmp_path / "short.npy"
    short.write_bytes(good.read_bytes()[:-5])
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % short, rc=1)
    assert "[io]" in err and "bytes of data" in err
    np.save(tmp_path / "shape.npy", np.zeros((3, 4), np.float32))
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % (tmp_path / "shape.npy"), rc=1)
    assert "[session]" in err and "[3,4]" in err
    np.save(tmp_path / "dtype.npy", np.zeros((2, 4), np.float64))
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % (tmp_path / "dtype.npy"), rc=1)
    assert "[session]" in err and "float64" in err
    np.save(tmp_path / "fortran.npy", np.asfortranarray(np.zeros((2, 4), np.float32)))
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % (tmp_path / "fortran.npy"), rc=1)
    assert "Fortran" in err
    np.save(tmp_path / "big.npy", np.zeros((2, 4), ">f4"))
    _, err = cge("run", mlp_cgm, "--input", "x=%s" % (tmp_path / "big.npy"), rc=1)
    assert "big-endian" in err
    _, err = cge("run", mlp_cgm, "--input-shape", "x:2,4", rc=2)
    assert "fixed input shapes" in err
    _, err = cge("run", tmp_path / "missing.cgm", rc=1)
    assert "[io]" in err


def test_run_damaged_model(mlp_cgm, tmp_path):
    data = bytearray(open(mlp_cgm, "rb").read())
    (tmp_path / "trunc.cgm").write_bytes(bytes(data[:len(data) // 2]))
    _, err = cge("run", tmp_path / "trunc.cgm", rc=1)
    assert "[io]" in err and "truncated" in err
    data[200] ^= 0xFF
    (tmp_path / "flip.cgm").write_bytes(bytes(data))
    _, err = cge("run", tmp_path / "flip.cgm", rc=1)
    assert "[io]" in err and "checksum" in err
    (tmp_path / "text.cgm").write_text("hello " * 40)
    _, err = cge("run", tmp_path / "text.cgm", rc=1)
    assert "[io]" in err


# Identity per dtype: .npy in, .npy out, for every dtype cge has.
DTYPES = [(TensorProto.FLOAT, "<f4"), (TensorProto.DOUBLE, "<f8"), (TensorProto.FLOAT16, "<f2"),
          (TensorProto.BFLOAT16, "<u2"), (TensorProto.INT8, "|i1"), (TensorProto.INT16, "<i2"),
          (TensorProto.INT32, "<i4"), (TensorProto.INT64, "<i8"), (TensorProto.UINT8, "|u1"),
          (TensorProto.UINT16, "<u2"), (TensorProto.UINT32, "<u4"), (TensorProto.UINT64, "<u8"),
          (TensorProto.BOOL, "|b1")]


@pytest.mark.parametrize("onnx_type,descr", DTYPES)
def test_npy_every_dtype(onnx_type, descr, tmp_path):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "id",
                          [helper.make_tensor_value_info("x", onnx_type, [2, 3])],
                          [helper.make_tensor_value_info("y", onnx_type, [2, 3])])
    model = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
                  tmp_path / "id.onnx")
    cge("compile", model, "-o", tmp_path / "id.cgm", "--opt-level", "0")
    rng = np.random.default_rng(3)
    x = (rng.integers(0, 2, (2, 3)) if descr == "|b1" else rng.integers(1, 100, (2, 3)))
    x = x.astype(np.dtype(descr))
    np.save(tmp_path / "x.npy", x)
    stdout, _ = cge("run", tmp_path / "id.cgm", "--input", "x=%s" % (tmp_path / "x.npy"),
                    "--output-dir", tmp_path / "out")
    y = np.load(tmp_path / "out" / "y.npy")
    assert y.dtype == x.dtype and y.shape == (2, 3)
    np.testing.assert_array_equal(y, x)
    if onnx_type == TensorProto.BFLOAT16:
        assert "bfloat16 stored as uint16 bits" in stdout
    # Random inputs of every dtype run too.
    cge("run", tmp_path / "id.cgm")


# ---- bench ---------------------------------------------------------------------------


BENCH_KEYS = {"load_ms", "prepare_ms", "first_run_ms", "iterations", "min_ms", "p50_ms", "p90_ms",
              "p99_ms", "max_ms", "mean_ms", "throughput_per_s", "peak_rss_bytes", "mode"}


def test_bench(mlp, mlp_cgm):
    out, _ = cge("bench", mlp_cgm, "--iterations", 7, "--warmup", 1, "--json", "--mode", "plan")
    r = json.loads(out)
    assert BENCH_KEYS <= set(r) and r["iterations"] == 7 and r["mode"] == "plan"
    assert r["min_ms"] <= r["p50_ms"] <= r["p90_ms"] <= r["p99_ms"] <= r["max_ms"]
    assert r["peak_rss_bytes"] > 0 and r["arena_bytes"] > 0
    out, _ = cge("bench", mlp, "--input-shape", "x:2,4", "--duration", "0.2", "--json",
                 "--threads", 1)
    r = json.loads(out)
    assert r["format"] == "onnx" and r["import_ms"] > 0 and r["iterations"] >= 1
    assert r["threads"] == 1
    out, _ = cge("bench", mlp_cgm, "--iterations", 3)
    assert "p99" in out and "throughput" in out and "peak memory" in out
    for bad in (("--iterations", "0"), ("--warmup", "-1"), ("--duration", "x"),
                ("--mode", "nope")):
        cge("bench", mlp_cgm, *bad, rc=2)
    _, err = cge("bench", "/nonexistent.cgm", rc=1)
    assert "[io]" in err


@pytest.fixture(scope="module")
def add2(tmp_path_factory):
    """z = x + y, both [batch, seq]."""
    d = tmp_path_factory.mktemp("cli_add2")
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"])], "add2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", "seq"])])
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
                 d / "add2.onnx")


SWEEP_KEYS = {"model", "format", "threads", "import_ms", "prepare_ms", "iterations", "warmup",
              "total_ms", "sizes"}
SIZE_KEYS = {"inputs", "mode", "first_run_ms", "min_ms", "p50_ms", "p90_ms", "runs",
             "first_over_p50"}


def test_bench_shapes_sweeps_sizes_in_one_session(mlp, add2):
    out, _ = cge("bench", "--help")
    assert "--shapes SIZES" in out and "SYMBOL=N1,N2,..." in out
    out, _ = cge("bench", mlp, "--shapes", "batch=1,2,4,2", "--iterations", 4, "--warmup", 1,
                 "--json", "--threads", 1)
    r = json.loads(out)
    assert SWEEP_KEYS <= set(r) and r["format"] == "onnx" and r["iterations"] == 4
    assert [s["inputs"] for s in r["sizes"]] == [{"x": [b, 4]} for b in (1, 2, 4, 2)]
    for s in r["sizes"]:
        assert SIZE_KEYS <= set(s) and s["runs"] == 4 and s["mode"] == "replay"
        assert 0 < s["min_ms"] <= s["p50_ms"] <= s["p90_ms"] and s["first_run_ms"] > 0
    # The table: one row per size, first run and steady latency.
    out, _ = cge("bench", mlp, "--shapes", "x:1,4; x:3,4", "--iterations", 2)
    lines = out.splitlines()
    assert "2 size(s) in one session" in lines[0]
    assert lines[1].split() == ["size", "mode", "first", "run", "ms", "p50", "ms", "p90", "ms",
                                "first/p50"]
    assert lines[2].split()[:2] == ["x:1,4", "replay"] and lines[3].split()[0] == "x:3,4"
    assert "first run: the first run at that size" in lines[4]
    # Two symbols: zipped, a single value repeated; an input not given takes
    # its symbolic dims from one that is.
    out, _ = cge("bench", add2, "--shapes", "batch=2", "--shapes", "seq=1,5,7", "--json",
                 "--iterations", 1)
    assert [s["inputs"] for s in json.loads(out)["sizes"]] == [
        {"x": [2, s], "y": [2, s]} for s in (1, 5, 7)]
    out, _ = cge("bench", add2, "--shapes", "x:2,3;x:4,1 y:4,1", "--json", "--iterations", 1)
    assert [s["inputs"] for s in json.loads(out)["sizes"]] == [
        {"x": [2, 3], "y": [2, 3]}, {"x": [4, 1], "y": [4, 1]}]
    # --input-shape with a name makes a symbolic dim to sweep.
    out, _ = cge("bench", add2, "--input-shape", "x:b,3", "--input-shape", "y:b,3", "--shapes",
                 "b=1,6", "--json", "--iterations", 1)
    assert [s["inputs"]["y"] for s in json.loads(out)["sizes"]] == [[1, 3], [6, 3]]


def test_bench_shapes_bad_arguments(mlp, mlp_cgm, add2, tmp_path):
    _, err = cge("bench", mlp, "--shapes", "nope=1,2", rc=2)
    assert "no symbolic dim named 'nope' (theirs: batch)" in err
    _, err = cge("bench", add2, "--shapes", "batch=1,2", "--shapes", "seq=1,2,3", rc=2)
    assert "different lengths (2 and 3)" in err
    _, err = cge("bench", add2, "--shapes", "batch=1", "--shapes", "x:1,2", rc=2)
    assert "not both" in err
    _, err = cge("bench", mlp, "--shapes", "q:1,4", rc=2)
    assert "no input named 'q'" in err
    _, err = cge("bench", mlp, "--shapes", "batch=0", rc=2)
    assert "sizes >= 1" in err
    _, err = cge("bench", mlp, "--shapes", "x:1,a", rc=2)
    assert "dimensions are integers" in err
    np.save(tmp_path / "x.npy", np.ones((2, 4), np.float32))
    _, err = cge("bench", mlp, "--shapes", "batch=1", "--input", "x=%s" % (tmp_path / "x.npy"),
                 rc=2)
    assert "does not take --input" in err
    # A .cgm was compiled for one shape: another is the session's error, naming the size.
    _, err = cge("bench", mlp_cgm, "--shapes", "x:2,4;x:3,4", "--iterations", 1, rc=1)
    assert err.startswith("cge bench: x:3,4: [session]") and "declares [2,4]" in err


def test_run_with_a_named_dim(add2):
    out, _ = cge("run", add2, "--input-shape", "x:n,3", "--input-shape", "y:n,3")
    assert "output 'z': float32 [1,3]" in out


# ---- inspect ---------------------------------------------------------------------------


INSPECT_KEYS = {"inputs", "outputs", "nodes", "ops", "engines", "streams", "weight_bytes",
                "arena_bytes", "lower_bound_bytes", "naive_bytes"}


def test_inspect(mlp, mlp_cgm):
    a = json.loads(cge("inspect", mlp_cgm, "--json")[0])
    b = json.loads(cge("inspect", mlp, "--json", "--input-shape", "x:2,4")[0])
    assert INSPECT_KEYS <= set(a) and INSPECT_KEYS <= set(b)
    assert a["inputs"] == [{"name": "x", "dtype": "float32", "shape": [2, 4]}]
    assert a["outputs"] == [{"name": "y", "dtype": "float32", "shape": [2, 3]}]
    for k in ("nodes", "ops", "engines", "streams", "weight_bytes", "arena_bytes",
              "lower_bound_bytes", "naive_bytes"):
        assert a[k] == b[k], k
    assert sum(a["ops"].values()) == a["nodes"] and a["engines"] == {"cpu": a["nodes"]}
    assert a["weight_bytes"] >= W.nbytes + B.nbytes
    assert a["lower_bound_bytes"] <= a["arena_bytes"] <= a["naive_bytes"]
    assert a["format_version"] == 4 and "sse2" in a["cpu_required"]
    text, _ = cge("inspect", mlp_cgm)
    for word in ("inputs:", "outputs:", "ops:", "engines:", "streams:", "weights:", "arena:",
                 "lower bound"):
        assert word in text
    cge("inspect", mlp_cgm, "--verify")
    _, err = cge("inspect", mlp, rc=1)   # dynamic batch, no shape given
    assert err.startswith("cge inspect: [")
    cge("inspect", mlp_cgm, "--json=yes", rc=2)


# ---- dot -------------------------------------------------------------------------------


def test_dot(mlp, mlp_cgm, tmp_path):
    cge("dot", mlp_cgm, "-o", tmp_path / "a.dot")
    assert (tmp_path / "a.dot").read_text().startswith("digraph")
    cge("dot", mlp, "--input-shape", "x:2,4", "-o", tmp_path / "b.dot", "--after", "infer")
    assert "MatMul" in (tmp_path / "b.dot").read_text()
    cge("dot", mlp, "--input-shape", "x:2,4", "-o", tmp_path / "c.dot", "--after", "import")
    cge("dot", mlp, "--input-shape", "x:2,4", "-o", tmp_path / "d.dot", "--after",
        "fuse_matmul_epilogue")
    assert "FusedMatMul" in (tmp_path / "d.dot").read_text()
    cge("dot", mlp, "--input-shape", "x:2,4", "-o", tmp_path / "e.dot", "--after", "schedule")
    _, err = cge("dot", mlp, "--input-shape", "x:2,4", "-o", tmp_path / "f.dot", "--after",
                 "fuse_gelu", "--opt-level", "0", rc=1)
    assert "did not run" in err
    _, err = cge("dot", mlp_cgm, "-o", tmp_path / "x.dot", "--after", "cse", rc=2)
    assert "needs an .onnx" in err
    _, err = cge("dot", mlp, "-o", tmp_path / "x.dot", "--after", "nope", rc=2)
    assert "no such pass" in err
    _, err = cge("dot", mlp_cgm, rc=2)
    assert "-o" in err
    _, err = cge("dot", mlp_cgm, "-o", tmp_path / "no" / "x.dot", rc=1)
    assert "[io]" in err


# ---- profile ---------------------------------------------------------------------------


def test_profile(mlp, mlp_cgm, tmp_path, monkeypatch):
    for model, extra in ((mlp_cgm, []), (mlp, ["--input-shape", "x:2,4"])):
        out, _ = cge("profile", model, "-o", tmp_path / "t.json", "--iterations", 3, *extra)
        t = json.loads((tmp_path / "t.json").read_text())
        ev = t["traceEvents"]
        tracks = {e["args"]["name"] for e in ev if e.get("name") == "thread_name"}
        assert tracks == {"compile", "host dispatch", "kernel execution", "memory copies"}
        cats = {e.get("cat") for e in ev if e["ph"] == "X"}
        # Plan runs record nothing: they read and write the caller's buffers
        # in place, so the copies track is empty (CGE_COPY_IO=1 fills it).
        assert {"compile", "dispatch", "kernel", "run"} <= cats and "copy" not in cats
        kernels = [e for e in ev if e.get("cat") == "kernel"]
        assert len(kernels) % 3 == 0 and all(e["dur"] >= 0 for e in kernels)
        assert all("node" in e["args"] and "engine" in e["args"] for e in kernels)
        assert "op type" in out and "share" in out and "dispatch" in out
    monkeypatch.setenv("CGE_COPY_IO", "1")
    cge("profile", mlp_cgm, "-o", tmp_path / "c.json", "--iterations", 2)
    monkeypatch.delenv("CGE_COPY_IO")
    ev_c = json.loads((tmp_path / "c.json").read_text())["traceEvents"]
    assert any(e.get("cat") == "copy" for e in ev_c if e["ph"] == "X")
    # ONNX: the compile track shows the passes.
    assert any(e.get("cat") == "pass" and e["name"] == "plan_memory" for e in ev)
    _, err = cge("profile", mlp_cgm, rc=2)
    assert "-o" in err
    cge("profile", mlp_cgm, "-o", tmp_path / "t.json", "--iterations", "none", rc=2)
    cge("profile", mlp_cgm, "-o", tmp_path / "t.json", "--mode", "plan", rc=2)


def test_profile_node_by_node(tmp_path):
    """A model whose shapes follow computed values has no plan: profile runs
    it node by node (it refused with a [meta] error before) and reports each
    node as a step."""
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("Greater", ["r", "zero"], ["pos"]),
         helper.make_node("NonZero", ["pos"], ["y"])], "nz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, None])],
        [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    model = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
                  tmp_path / "nz.onnx")
    out, _ = cge("profile", model, "-o", tmp_path / "t.json", "--iterations", 2)
    ev = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    kernels = [e["name"] for e in ev if e.get("cat") == "kernel"]
    assert kernels.count("NonZero") == 2 and kernels.count("Relu") == 2
    assert any(e.get("cat") == "compile" and "node by node" in e["name"] for e in ev)
    # partitioned too (its inputs are sized): the layout pass ran
    assert any(e.get("cat") == "pass" and e["name"] == "layout_channels_last" for e in ev)
    assert "NonZero" in out


# ---- the bundled model -------------------------------------------------------------------


def test_small_cnn_bundled(tmp_path):
    assert os.path.getsize(SMALL_CNN) < 2 * 2**20
    cge("compile", SMALL_CNN, "-o", tmp_path / "cnn.cgm")
    out, _ = cge("run", tmp_path / "cnn.cgm", "--output-dir", tmp_path)
    assert "output 'probabilities': float32 [1,10]" in out
    p = np.load(tmp_path / "probabilities.npy")
    assert p.shape == (1, 10) and abs(float(p.sum()) - 1.0) < 1e-5 and (p >= 0).all()


def test_run_refuses_output_names_that_meet_as_files(tmp_path):
    # 'a/b' and 'a_b' are both written as a_b.npy: an error, never an overwrite.
    g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a/b"]), helper.make_node("Neg", ["x"], ["a_b"])], "two",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("a/b", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("a_b", TensorProto.FLOAT, [2])])
    model = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]),
                  tmp_path / "two.onnx")
    _, err = cge("run", model, "--output-dir", tmp_path / "out", rc=1)
    assert "'a/b' and 'a_b' would both be written" in err
    assert not (tmp_path / "out" / "a_b.npy").exists()
