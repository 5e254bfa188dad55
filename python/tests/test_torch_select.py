# cge.torch: the selection ops of detection heads, whose output sizes depend on
# values (bool-mask indexing, nonzero, torchvision's nms, unique) and those
# around them (topk, sort, index_put into a keep mask), against eager PyTorch
# on random data of several sizes; a compiled module keeps working when a new
# input selects a different number of elements; mixed int/float arithmetic
# takes PyTorch's promoted dtype.
import numpy as np
import pytest

import torch
import cge.torch  # noqa: E402


def _same(got, ref):
    got = got if isinstance(got, (tuple, list)) else (got,)
    ref = ref if isinstance(ref, (tuple, list)) else (ref,)
    assert len(got) == len(ref)
    for a, b in zip(got, ref):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
        if b.dtype.is_floating_point:
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
        else:
            assert torch.equal(a, b)


class BoolMask(torch.nn.Module):
    def forward(self, x, y):
        m = x > 0.3
        a = x[m] * 2 + 1                 # a 2-d mask over the whole tensor
        b = y[:, m[0]]                   # a 1-d mask on a later dim
        return a, a.sum(), b, torch.nonzero(m), y[y.sum(1) > 0]


@pytest.mark.parametrize("shape", [(3, 5), (8, 16), (1, 7), (32, 64)])
def test_bool_mask_indexing_matches(shape):
    g = torch.Generator().manual_seed(shape[0] * 100 + shape[1])
    x, y = torch.rand(shape, generator=g), torch.randn(4, shape[1], generator=g)
    fn = cge.torch.compile(BoolMask(), (x, y), fullgraph=True)
    assert fn.graph_breaks == []
    counts = set()
    for _ in range(4):   # new values, new counts: one compiled module
        x, y = torch.rand(shape, generator=g), torch.randn(4, shape[1], generator=g)
        got, ref = fn(x, y), BoolMask()(x, y)
        _same(got, ref)
        counts.add(ref[0].shape[0])
    assert fn.recompiles == 0
    if shape[0] * shape[1] > 8:
        assert len(counts) > 1   # the sizes did vary


def test_bool_mask_nothing_and_everything_selected():
    f = BoolMask()
    x, y = torch.rand(4, 6), torch.randn(4, 6)
    fn = cge.torch.compile(f, (x, y), fullgraph=True)
    for x in (torch.zeros(4, 6), torch.ones(4, 6)):
        _same(fn(x, y), f(x, y))


def _boxes(n, spread, seed):
    g = torch.Generator().manual_seed(seed)
    xy = torch.rand(n, 2, generator=g) * spread
    wh = torch.rand(n, 2, generator=g) * 30 + 1
    return torch.cat([xy, xy + wh], 1), torch.rand(n, generator=g)


@pytest.mark.parametrize("n,spread", [(10, 50), (200, 100), (300, 20)])
def test_nms_sort_topk_match(n, spread):
    torchvision = pytest.importorskip("torchvision")
    boxes, scores = _boxes(n, spread, n)

    def f(b, s):
        keep = torchvision.ops.nms(b, s, 0.5)
        v, i = s.topk(min(5, n))
        sv, si = s[keep].sort(descending=True)
        return keep, v, i, sv, si, s.sort()[0]
    fn = cge.torch.compile(f, (boxes, scores), fullgraph=True)
    assert fn.graph_breaks == []
    _same(fn(boxes, scores), f(boxes, scores))


def test_batched_nms_keep_mask():
    """torchvision's per-class NMS (batched_nms without the coordinate
    trick): unique labels, where(labels == c), nms, index_put into a keep
    mask, nonzero, sort."""
    torchvision = pytest.importorskip("torchvision")
    boxes, scores = _boxes(120, 60, 7)
    labels = torch.randint(0, 4, (120,), generator=torch.Generator().manual_seed(1))

    def f(b, s, lab):
        keep_mask = torch.zeros_like(s, dtype=torch.bool)
        for c in torch.unique(lab):
            idx = torch.where(lab == c)[0]
            k = torchvision.ops.nms(b[idx], s[idx], 0.4)
            keep_mask[idx[k]] = True
        keep = torch.where(keep_mask)[0]
        return keep[s[keep].sort(descending=True)[1]]
    fn = cge.torch.compile(f, (boxes, scores, labels), fullgraph=True)
    assert fn.graph_breaks == []
    _same(fn(boxes, scores, labels), f(boxes, scores, labels))


def test_index_put_and_unique():
    def f(x, idx, lab):
        y = x.clone()
        y[idx] = 5.0
        z = torch.zeros(6)
        z.index_put_((idx,), torch.ones(3), accumulate=True)
        m = x.clone()
        m[x > 0.5] = -1.0
        u, inv, cnt = torch.unique(lab, return_inverse=True, return_counts=True)
        return y, z, m, u, inv, cnt
    x = torch.rand(6, generator=torch.Generator().manual_seed(2))
    idx, lab = torch.tensor([1, 4, 1]), torch.tensor([[3, 1], [3, 7]])
    fn = cge.torch.compile(f, (x, idx, lab), fullgraph=True)
    _same(fn(x, idx, lab), f(x, idx, lab))


def test_int_tensor_with_float_number_promotes():
    """arange(n) + 0.5 and int / int are float in PyTorch (the 0.5 was once
    truncated to the int tensor's dtype: SSD's anchor centres came out 8
    pixels off)."""
    def f(x):
        r = torch.arange(0, x.shape[0])
        return (r + 0.5) * x, r / 3, r * 2.5 - 1.25, 7 - r * 0.5
    x = torch.rand(6)
    fn = cge.torch.compile(f, (x,), fullgraph=True)
    _same(fn(x), f(x))


def test_node_of_many_inputs_in_a_data_dependent_graph():
    """A data-dependent graph runs node by node; a Concat of 89 pieces (SSD's
    per-class boxes) was refused there ("more than 64 inputs or outputs in
    eager mode")."""
    def f(m, *xs):
        return torch.cat(xs, 0), m[m > 0.5]
    g = torch.Generator().manual_seed(4)
    xs = tuple(torch.rand(3, 4, generator=g) for _ in range(89))
    m = torch.rand(10, generator=g)
    fn = cge.torch.compile(f, (m,) + xs, fullgraph=True)
    _same(fn(m, *xs), f(m, *xs))
