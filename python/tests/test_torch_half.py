# cge.torch.compile of float16 and bfloat16 modules (`module.half()`,
# `.to(torch.bfloat16)`): outputs in the module's dtype, agreeing with the
# float32 module on the same (half) weights within half's rounding.
#
# - float16: PyTorch 1.13's CPU has no Half kernels for addmm, conv and
#   friends, so tracing the module itself fails; it is traced as a float32
#   copy between casts (values between operators not rounded, as cge's
#   widen_half pass runs a half ONNX model). It raised RuntimeError before.
# - bfloat16: traced as it is; the converters' Python-number and filled
#   constants (a division by sqrt(d), LayerNorm without weights) took the
#   uint16 that carries bfloat16 as an integer dtype (x / 2.83 computed
#   x / 2; ones became the bits 0x0001): 41% off before.
import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import cge.torch  # noqa: E402

nn = torch.nn


class Scaled(nn.Module):
    """Attention-style scaling, a plain LayerNorm, a softmax."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16, elementwise_affine=False)

    def forward(self, x):
        y = self.fc(x) / 2.8284271247461903 + 0.5
        return torch.softmax(self.norm(y) * 1.7, dim=-1)


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.c1(x)))
        return self.fc(y.mean(dim=(2, 3)))


def _encoder():
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)


CASES = [("scaled", Scaled, (3, 5, 16)), ("cnn", SmallCnn, (2, 3, 12, 10)),
         ("encoder", _encoder, (2, 7, 32))]


@pytest.mark.parametrize("dt,steps", [(torch.float16, 2), (torch.bfloat16, 2)],
                         ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name,make,shape", CASES, ids=[c[0] for c in CASES])
def test_half_module_matches_float32(dt, steps, name, make, shape):
    torch.manual_seed(0)
    m = make().eval()
    half = copy.deepcopy(m).to(dt)
    x = (torch.rand(*shape) * 2 - 1).to(dt)
    ref = copy.deepcopy(half).float()(x.float())   # the same weights, in float32
    compiled = cge.torch.compile(half, (x,), fullgraph=True)
    y = compiled(x)
    assert y.dtype == dt and y.shape == ref.shape
    assert compiled.graph_breaks == []
    eps = 2.0 ** -10 if dt == torch.float16 else 2.0 ** -7
    scale = float(ref.abs().max())
    err = float((y.float() - ref).abs().max()) / scale
    assert err <= steps * eps, "%s %s: %.2e" % (name, dt, err)
    # the module's own parameters are left as they were
    assert all(p.dtype == dt for p in half.parameters())


def test_float16_module_runs_again_at_new_shape():
    """The float32 copy is made per trace: a new shape (a recompile) traces
    it again and gives the same answer as the first."""
    torch.manual_seed(1)
    m = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 3)).half().eval()
    compiled = cge.torch.compile(m, (torch.rand(2, 8).half(),), fullgraph=True)
    for rows in (2, 5):
        x = torch.rand(rows, 8).half()
        ref = copy.deepcopy(m).float()(x.float())
        y = compiled(x)
        assert y.dtype == torch.float16
        np.testing.assert_allclose(y.float().numpy(), ref.detach().numpy(), rtol=0,
                                   atol=2 * 2.0 ** -10 * float(ref.abs().max()))
    assert compiled.recompiles == 1


class Filled(nn.Module):
    """A fill of the input's dtype (zeros/ones/full) added to it."""

    def forward(self, x):
        return x + torch.full(x.shape, 0.3, dtype=x.dtype) * torch.ones(x.shape, dtype=x.dtype)


def test_bfloat16_fills():
    x = (torch.rand(3, 4) * 2 - 1).to(torch.bfloat16)
    y = cge.torch.compile(Filled(), (x,), fullgraph=True)(x)
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, Filled()(x))   # PyTorch rounds the same way here
