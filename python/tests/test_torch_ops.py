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
