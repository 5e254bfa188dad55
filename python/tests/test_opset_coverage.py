# Every (operator, version) that ONNX opsets 7-18 resolve to has a converter,
# or a written reason in tests/onnx_conformance/opset_missing.txt; a listed
# pair that became covered must leave the list.
import importlib.util
import os

import onnx  # noqa: F401  (required: conftest.REQUIRED)

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_checker():
    path = os.path.join(ROOT, "tests", "onnx_conformance", "opset_coverage.py")
    spec = importlib.util.spec_from_file_location("opset_coverage", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_opset_7_18_pair_is_covered_or_has_a_reason():
    cov = load_checker()
    pairs = cov.onnx_pairs()
    assert len(pairs) == 384  # onnx 1.12's 7-17 plus opset 18's changes
    missing = set(cov.missing_pairs())
    listed = cov.read_missing_list()
    assert all(listed.values()), "every listed pair needs a reason"
    assert not missing - set(listed), "gaps without a reason: %s" % sorted(missing - set(listed))
    assert not set(listed) - missing, "covered now, drop from the list: %s" % sorted(
        set(listed) - missing)


def test_recurrent_and_opset18_pairs_are_covered():
    # the pairs issue 13 named first
    missing = set(load_checker().missing_pairs())
    for pair in (("LSTM", 7), ("GRU", 7), ("RNN", 7), ("Max", 6), ("Resize", 18),
                 ("Split", 18), ("GroupNormalization", 18), ("Col2Im", 18),
                 ("CenterCropPad", 18), ("LpPool", 18), ("RoiAlign", 10)):
        assert pair not in missing
