# Resize to the input's own size (a detector's transform handed an image of
# its target size, scales all 1) is a copy: every coordinate mode that maps
# each output index onto the same input index gives the input back bit for
# bit, in every interpolation mode, for float32 (infinities, -0.0 and NaN
# included) and int64 values past float64's 53 bits; the channels-last path
# of a convolution network too. A mode that does not map onto the same
# index (tf_half_pixel_for_nn) still interpolates.
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import cge

MODES = [("nearest", {}), ("nearest", {"nearest_mode": "floor"}),
         ("nearest", {"nearest_mode": "round_prefer_ceil"}), ("linear", {}), ("cubic", {}),
         ("cubic", {"exclude_outside": 1})]
CTMS = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners"]


def _resize(x, mode, attrs, ctm, by_sizes, dtype):
    shape = list(x.shape)
    inits = [numpy_helper.from_array(np.array([], np.float32), "roi")]
    if by_sizes:
        inits.append(numpy_helper.from_array(np.array(shape, np.int64), "sizes"))
        ins = ["x", "roi", "", "sizes"]
    else:
        inits.append(numpy_helper.from_array(np.ones(len(shape), np.float32), "scales"))
        ins = ["x", "roi", "scales"]
    node = helper.make_node("Resize", ins, ["y"], mode=mode, coordinate_transformation_mode=ctm,
                            **attrs)
    g = helper.make_graph([node], "rz", [helper.make_tensor_value_info("x", dtype, shape)],
                          [helper.make_tensor_value_info("y", dtype, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return cge.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]


@pytest.mark.parametrize("mode,attrs", MODES)
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("by_sizes", [True, False])
def test_same_size_resize_is_the_input(mode, attrs, ctm, by_sizes):
    rng = np.random.default_rng(0)
    # every axis longer than 1: pytorch_half_pixel samples a length-1 axis
    # at -0.5 (onnx's reference), not at 0
    x = rng.standard_normal((2, 3, 7, 5)).astype(np.float32)
    x[0, 0, 0, :4] = [np.inf, -np.inf, -0.0, np.nan]
    y = _resize(x, mode, attrs, ctm, by_sizes, TensorProto.FLOAT)
    assert y.tobytes() == x.tobytes()
    if mode == "nearest":   # integers: copied exactly, past 2**53 too
        xi = (rng.integers(-2**62, 2**62, (2, 3, 4, 6), dtype=np.int64) | 1)
        yi = _resize(xi, mode, attrs, ctm, by_sizes, TensorProto.INT64)
        assert np.array_equal(yi, xi)


def test_a_shifted_mode_still_interpolates():
    x = np.arange(20, dtype=np.float32).reshape(1, 1, 4, 5)
    # tf_half_pixel_for_nn samples at o + 0.5: nearest with ceil moves by one
    y = _resize(x, "nearest", {"nearest_mode": "ceil"}, "tf_half_pixel_for_nn", True,
                TensorProto.FLOAT)
    want = x[:, :, np.minimum(np.arange(4) + 1, 3)][:, :, :, np.minimum(np.arange(5) + 1, 4)]
    assert np.array_equal(y, want)


def test_channels_last_same_size_resize(tmp_path):
    """Between channels-last convolutions (level 3), a same-size Resize is
    the input too, and the network's output equals level 1's (plain)."""
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv2d(3, 8, 3, padding=1)
            self.b = nn.Conv2d(8, 4, 3, padding=1)

        def forward(self, x):
            y = self.a(x)
            y = nn.functional.interpolate(y, size=(9, 11), mode="bilinear", align_corners=False)
            return self.b(y)

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.rand(1, 3, 9, 11)
    path = str(tmp_path / "net.onnx")
    torch.onnx.export(net, (x,), path, opset_version=13, input_names=["input"],
                      output_names=["output"])
    with torch.no_grad():
        ref = net(x).numpy()
    outs = [cge.InferenceSession(path, opt_level=lv).run(None, {"input": x.numpy()})[0]
            for lv in (1, 3)]
    for y in outs:
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
