# The static-cache decoder (scripts/make_dynamic_models.py's StaticDecoder, at
# tiny sizes, exported into tmp_path): cge's greedy tokens equal PyTorch's
# concat-cache decoder with the same weights, the caches hold the concat
# form's keys and values at their slots, and the decoding steps (one shape,
# only pos's value changing) compile nothing after the first and replay.
import importlib.util
import os

import numpy as np
import pytest

import cge

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = dict(layers=2, d_model=32, heads=2, vocab=50, max_pos=64, ff=64)
MAX_LEN = 24
PROMPT = np.array([[7, 3, 41, 0, 18]], np.int64)
STEPS = 12


def _load_maker():
    spec = importlib.util.spec_from_file_location(
        "make_dynamic_models", os.path.join(ROOT, "scripts", "make_dynamic_models.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mdm = _load_maker()


@pytest.fixture(scope="module")
def tiny():
    dec = mdm.decoder(**TINY)
    return dec, mdm.static_decoder(dec, MAX_LEN)


@pytest.fixture(scope="module")
def exported(tiny, tmp_path_factory):
    """{opset: path of the tiny static decoder exported at that opset}."""
    d = tmp_path_factory.mktemp("static_cache")
    paths = {}
    for opset in (13, 17):
        paths[opset] = str(d / ("decoder_static_%d.onnx" % opset))
        mdm.export_static(tiny[1], paths[opset], opset=opset)
    return paths


def _step(sess):
    names = [i.name for i in sess.get_inputs()]

    def step(ids, pos, *caches):
        return sess.run(None, dict(zip(names, (ids, pos) + caches)))
    return step


def test_static_module_matches_concat_decoder(tiny):
    """The PyTorch modules themselves agree: the static form is the same model."""
    dec, static = tiny
    ref, logits = mdm.torch_greedy(dec, PROMPT, STEPS)
    got, first = mdm.static_greedy(mdm.torch_static_step(static), static, PROMPT, STEPS)
    assert got == ref
    np.testing.assert_allclose(first, logits, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("mode", [None, "plan"])
def test_tokens_equal_pytorch(tiny, exported, opset, mode):
    dec, static = tiny
    sess = cge.InferenceSession(exported[opset], run_mode=mode)
    ins, outs = mdm.static_io_names(static)
    assert [i.name for i in sess.get_inputs()] == ins
    assert [o.name for o in sess.get_outputs()] == outs
    shapes = mdm.static_cache_shapes(static)
    assert [i.shape for i in sess.get_inputs()] == [[1, "seq"], [1]] + [list(s) for s in shapes]
    ref, logits = mdm.torch_greedy(dec, PROMPT, STEPS)
    got, first = mdm.static_greedy(_step(sess), static, PROMPT, STEPS)
    assert got == ref
    np.testing.assert_allclose(first, logits, rtol=1e-4, atol=1e-4)


def test_caches_hold_the_concat_presents(tiny, exported):
    """Slot t of the static caches holds the concat decoder's key/value of
    position t; the slots not yet written keep the caller's zeros."""
    import torch
    dec, static = tiny
    sess = cge.InferenceSession(exported[13])
    step = _step(sess)
    caches = mdm.static_cache(static)
    n = PROMPT.shape[1]
    _, *caches = step(PROMPT, np.array([0], np.int64), *caches)
    _, *caches = step(np.array([[5]], np.int64), np.array([n], np.int64), *caches)
    blk = dec.blocks[0]
    past = [torch.zeros(1, blk.heads, 0, blk.head_dim) for _ in range(2 * len(dec.blocks))]
    with torch.no_grad():
        out = dec(torch.from_numpy(PROMPT), *past)
        out = dec(torch.tensor([[5]]), *out[1:])
    for i, c in enumerate(caches):
        ref = out[1 + i].numpy()   # [1, heads, n + 1, head_dim]
        np.testing.assert_allclose(c[:, :, :n + 1], ref, rtol=1e-4, atol=1e-5)
        assert not c[:, :, n + 1:].any()


def test_decoding_compiles_once_and_replays(tiny, exported, monkeypatch, tmp_path):
    """After the first decoding step, no step compiles: every compile writes
    the pass manager's dumps into $CGE_DUMP_DIR, and none appear. (No public
    compile counter exists; the dumps are the observable trace of one.)"""
    dump = tmp_path / "dump"
    monkeypatch.setenv("CGE_DUMP_DIR", str(dump))
    monkeypatch.delenv("CGE_RUN_MODE", raising=False)

    def compiled():
        files = list(dump.iterdir()) if dump.exists() else []
        for f in files:
            f.unlink()
        return len(files)

    _, static = tiny
    sess = cge.InferenceSession(exported[13])
    step = _step(sess)
    caches = mdm.static_cache(static)
    n = PROMPT.shape[1]
    logits, *caches = step(PROMPT, np.array([0], np.int64), *caches)
    token = int(logits[0, -1].argmax())
    logits, *caches = step(np.array([[token]], np.int64), np.array([n], np.int64), *caches)
    # Creation, prefill or the first step compiled (so the check below can see one).
    assert compiled() > 0
    # The first step is its signature's first run (a plan run); every later
    # step has the same shapes and replays.
    assert sess.last_run_mode() == "plan"
    for i in range(1, STEPS):
        token = int(logits[0, -1].argmax())
        logits, *caches = step(np.array([[token]], np.int64), np.array([n + i], np.int64), *caches)
        assert sess.last_run_mode() == "replay"
        assert compiled() == 0, "decoding step %d compiled again" % i


def test_bound_caches_are_written_in_place(tiny, exported):
    """Each cache one array, bound as its past and its present: the steps
    write the new slots into it (no present arrays, no copies back), replay,
    and give PyTorch's greedy tokens."""
    dec, static = tiny
    ref, _ = mdm.torch_greedy(dec, PROMPT, STEPS)
    sess = cge.InferenceSession(exported[13])
    ins, outs = mdm.static_io_names(static)
    caches = mdm.static_cache(static)
    out = sess.run(None, dict(zip(ins, [PROMPT, np.array([0], np.int64)] + caches)))
    for c, x in zip(caches, out[1:]):
        c[...] = x
    ids, pos = np.empty((1, 1), np.int64), np.empty(1, np.int64)
    logits = np.empty((1, 1, TINY["vocab"]), np.float32)
    io = sess.io_binding()
    io.bind_cpu_input("ids", ids)
    io.bind_cpu_input("pos", pos)
    io.bind_ortvalue_output("logits", cge.OrtValue(logits))
    for past, present, c in zip(ins[2:], outs[1:], caches):
        io.bind_cpu_input(past, c)
        io.bind_ortvalue_output(present, cge.OrtValue(c))
    tokens = [int(out[0][0, -1].argmax())]
    n = PROMPT.shape[1]
    for i in range(STEPS):
        ids[0, 0], pos[0] = tokens[-1], n + i
        before = [c[:, :, n + i].copy() for c in caches]
        sess.run_with_iobinding(io)
        tokens.append(int(logits[0, -1].argmax()))
        assert sess.last_run_mode() == "replay" or i == 0
        # The slot of this step changed in every cache, in the caller's arrays.
        assert all(not np.array_equal(b, c[:, :, n + i]) for b, c in zip(before, caches))
    assert tokens == ref
