# Converters of common aten ops that used to break graphs (found by random
# modules compared with PyTorch eager): each function below compiles with
# fullgraph=True (no graph break) and gives PyTorch's values and dtype.
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import cge.torch  # noqa: E402

CASES = {
    "flip": lambda x: torch.flip(x, [0, 2]),
    "clamp_min_": lambda x: (x * 1).clamp_min_(0.1) + (x * 1).clamp_max_(0.2),
    "sign": lambda x: torch.sign(x - x.round()),
    "round": lambda x: torch.round(x * 2.5),
    "round_decimals": lambda x: torch.round(x * 7, decimals=1),
    "softplus": lambda x: torch.nn.functional.softplus(x * 12),
    "softplus_beta": lambda x: torch.nn.functional.softplus(x * 12, beta=2.0, threshold=5.0),
    "amin": lambda x: x.amin(dim=(0, 2), keepdim=True) + x.amin(-1, keepdim=True),
    "max_dim": lambda x: torch.max(x, 1).values * torch.max(x, 1).indices,
    "min_dim_keep": lambda x: torch.min(x, -1, keepdim=True)[1].float(),
    "argmax": lambda x: x.argmax(-1).sum(-1, keepdim=True) + x.argmin(1),
    "argmax_flat": lambda x: x.argmax(),
    "cumsum": lambda x: torch.cumsum(x, 1) + torch.cumsum(x, -1),
    "var_std": lambda x: (x.var(-1, keepdim=True) + x.std(dim=(0, 1))
                         + x.var(1, unbiased=False, keepdim=True)),
    "eye": lambda x: x[0] @ torch.eye(5) + torch.eye(4, 5),
    "gather": lambda x: torch.gather(x, 2, (x.abs() * 3).long().clamp(max=4)),
    "index_select": lambda x: torch.index_select(x, 1, torch.tensor([3, 0, 0, 2])),
    "inplace_unary": lambda x: (x.abs() + 1).sqrt_() + (x * 1).exp_(),
}


@pytest.mark.parametrize("name", list(CASES))
def test_converts_whole_and_matches_eager(name):
    fn = CASES[name]
    torch.manual_seed(1)
    x = torch.randn(3, 4, 5)
    ref = fn(x)
    y = cge.torch.compile(fn, (x,), fullgraph=True)(x)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


F = torch.nn.functional


@pytest.mark.parametrize("mode,kw", [
    ("bilinear", dict(scale_factor=1.5)), ("bicubic", dict(scale_factor=1.5)),
    ("nearest", dict(scale_factor=1.5)), ("bilinear", dict(scale_factor=(0.6, 1.7))),
    ("bilinear", dict(scale_factor=1.5, recompute_scale_factor=True)),
    ("bilinear", dict(size=(13, 15))), ("bicubic", dict(scale_factor=1.5, align_corners=True)),
    ("linear", dict(scale_factor=2.5)), ("nearest", dict(scale_factor=0.7)),
    ("trilinear", dict(scale_factor=1.5)),
])
def test_interpolate_by_a_scale(mode, kw):
    """interpolate by a scale factor samples at steps of 1 / scale, as
    PyTorch does (not at in / out: x1.5 of 9 rows gave other values before)."""
    torch.manual_seed(2)
    x = torch.randn(*{"linear": (1, 2, 9), "trilinear": (1, 2, 5, 6, 7)}.get(mode, (1, 2, 9, 10)))
    fn = lambda t: F.interpolate(t, mode=mode, **kw)   # noqa: E731
    ref = fn(x)
    y = cge.torch.compile(fn, (x,), fullgraph=True)(x)
    assert y.shape == ref.shape
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_converter_giving_other_shapes_is_refused():
    """A converted node whose cge shape differs from the traced one is a
    ConverterError naming both (its outputs used to be read into buffers of
    the traced size, the rest garbage)."""
    aten = torch.ops.aten
    orig = cge.torch.find_converter(aten.flip.default)
    try:
        @cge.torch.register_converter(aten.flip.default, override=True)
        def short_flip(ctx, node, x, dims):
            return ctx.op("Slice", data=x, starts=ctx.ints([1]), ends=ctx.ints([2 ** 62]),
                          axes=ctx.ints([0]))
        with pytest.raises(cge.ConverterError, match=r"cge computes output 0 as \[2, 5\], "
                                                     r"PyTorch traced \[3, 5\]"):
            cge.torch.compile(lambda t: torch.flip(t, [0]) + 1, (torch.randn(3, 5),),
                              fullgraph=True)
    finally:
        cge.torch.register_converter(aten.flip.default, override=True)(orig)


CASES_4D = {
    "maximum_minimum": lambda x: torch.maximum(x, x.flip(3)) + torch.minimum(x, torch.tensor(0.1)),
    "fmod_remainder": lambda x: torch.fmod(x * 3, 1.5) + torch.remainder(x * 3, -1.5),
    "int_remainder_floordiv": lambda x: (torch.remainder((x * 9).long(), 4)
                                         + torch.div((x * 9).long(), 4, rounding_mode="floor")
                                         + torch.div((x * 9).long(), -3, rounding_mode="trunc")
                                         + (x * 9).long() // 2
                                         + torch.fmod((x * 9).long(), -3)).float(),
    "div_modes": lambda x: torch.div(x * 5, 2, rounding_mode="floor") + torch.div(x * 5, 2,
                                                                                rounding_mode="trunc"),
    "trunc_frac": lambda x: torch.trunc(x * 3) + torch.frac(x * 2),
    "log1p_expm1": lambda x: torch.log1p(x.abs()) + torch.expm1(x.clamp(max=3)),
    "inverse_trig": lambda x: torch.asinh(x) + torch.atan(x) + torch.tan(x.clamp(-1, 1)),
    "mish_logsigmoid": lambda x: torch.nn.functional.mish(x) + torch.nn.functional.logsigmoid(x),
    "prelu": lambda x: torch.nn.functional.prelu(x, torch.linspace(0.1, 0.8, 8)),
    "shrink_threshold": lambda x: (torch.nn.functional.hardshrink(x, 0.3)
                                   + torch.nn.functional.threshold(x, 0.1, -1.0)),
    "clamp_tensor": lambda x: torch.clamp(x, min=x.mean(1, keepdim=True), max=x.amax(1, keepdim=True) * 0.5),
    "addcmul_lerp": lambda x: torch.addcmul(x, x, x, value=0.1) + torch.lerp(x, x * 2, 0.3)
                              + torch.addcdiv(x, x, x.abs() + 1, value=0.5),
    "nan_to_num": lambda x: torch.nan_to_num(x / (x.abs() > 0.3).float(), posinf=2.0, neginf=-2.0)
                            + torch.nan_to_num(torch.log(x)),
    "glu": lambda x: torch.nn.functional.glu(x, 1),
    "bitwise": lambda x: (((x > 0) & (x < 1)) | ((x < -1) ^ (x < -2))).float()
                         + ((x * 9).long() & torch.tensor(5)).float()
                         + ((x * 9).long() | torch.tensor(2)).float(),
    "scatter_add": lambda x: x.scatter_add(3, (x.abs() * 3).long().clamp(max=9), x),
    "pads": lambda x: torch.nn.functional.pad(x, (1, 1, 2, 0), mode="reflect")[..., :9, :10]
                      + torch.nn.functional.pad(x, (0, 2, 1, 1), mode="replicate")[..., :9, :10],
    "pixel_shuffle": lambda x: torch.nn.functional.pixel_shuffle(x, 2).sum()
                               + torch.nn.functional.pixel_unshuffle(x[..., :8, :10], 2).sum(1),
    "adaptive_pools": lambda x: (torch.nn.functional.adaptive_avg_pool2d(x, (4, 3))
                                 + torch.nn.functional.adaptive_max_pool2d(x, (4, 3))),
    "unfold": lambda x: x.unfold(3, 3, 2).sum(-1),
    "sum_dtype": lambda x: x.sum(1, dtype=torch.float64).float() + x.mean(dtype=torch.float32),
}


@pytest.mark.parametrize("name", list(CASES_4D))
def test_converts_whole_and_matches_eager_4d(name):
    fn = CASES_4D[name]
    torch.manual_seed(3)
    x = torch.randn(1, 8, 9, 10)
    ref = fn(x)
    y = cge.torch.compile(fn, (x,), fullgraph=True)(x)
    assert y.dtype == ref.dtype and y.shape == ref.shape
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)
