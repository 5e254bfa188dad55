# NonMaxSuppression on many candidates (the grid over x and the vector test
# against kept boxes) against a plain greedy NumPy reference: detector-like
# batched boxes (classes offset along x), ties, degenerate and wide boxes,
# both box encodings.
import numpy as np
import pytest

import cge

from onnx import TensorProto, helper


def greedy(boxes, scores, max_out, iou, thr, center):
    out = []
    for b in range(scores.shape[0]):
        for c in range(scores.shape[1]):
            sc = scores[b, c].astype(np.float64)
            cand = [i for i in range(len(sc)) if thr is None or sc[i] > thr]
            cand.sort(key=lambda i: (-sc[i], i))
            bx = boxes[b].astype(np.float64)
            if center:
                x1, x2 = bx[:, 0] - bx[:, 2] / 2, bx[:, 0] + bx[:, 2] / 2
                y1, y2 = bx[:, 1] - bx[:, 3] / 2, bx[:, 1] + bx[:, 3] / 2
            else:
                y1, y2 = np.minimum(bx[:, 0], bx[:, 2]), np.maximum(bx[:, 0], bx[:, 2])
                x1, x2 = np.minimum(bx[:, 1], bx[:, 3]), np.maximum(bx[:, 1], bx[:, 3])
            kept = []
            for i in cand:
                if len(kept) >= max_out:
                    break
                ok = True
                for j in kept:
                    ix1, ix2 = max(x1[i], x1[j]), min(x2[i], x2[j])
                    iy1, iy2 = max(y1[i], y1[j]), min(y2[i], y2[j])
                    if ix2 <= ix1 or iy2 <= iy1:
                        continue
                    inter = (ix2 - ix1) * (iy2 - iy1)
                    aa, ab = (x2[i] - x1[i]) * (y2[i] - y1[i]), (x2[j] - x1[j]) * (y2[j] - y1[j])
                    uni = aa + ab - inter
                    if aa <= 0 or ab <= 0 or uni <= 0:
                        continue
                    if inter / uni > iou:
                        ok = False
                        break
                if ok:
                    kept.append(i)
            out += [[b, c, i] for i in kept]
    return np.array(out, np.int64).reshape(-1, 3)


def nms_model(center):
    g = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["b", "s", "m", "i", "t"], ["y"],
                          center_point_box=int(center))], "g",
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["B", "N", 4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, ["B", "C", "N"]),
         helper.make_tensor_value_info("m", TensorProto.INT64, [1]),
         helper.make_tensor_value_info("i", TensorProto.FLOAT, [1]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["K", 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("n,classes,max_out", [(700, 1, 10 ** 6), (300, 3, 50), (2000, 1, 100)])
def test_many_candidates_match_greedy(center, n, classes, max_out):
    rng = np.random.default_rng(n + classes)
    k = rng.integers(0, 8, n)                    # batched NMS: classes apart along x
    y1, x1 = rng.uniform(0, 300, n), rng.uniform(0, 300, n) + k * 400
    h, w = rng.uniform(0, 60, n), rng.uniform(0, 60, n)
    w[:20] = rng.uniform(500, 3000, 20)          # wide boxes (the list every candidate reads)
    h[20:30] = 0                                 # degenerate
    if center:
        bx = np.stack([x1 + w / 2, y1 + h / 2, w, h], 1)
    else:
        bx = np.stack([y1 + h, x1, y1, x1 + w], 1)   # any diagonal pair
    bx = bx.astype(np.float32)[None]
    sc = rng.uniform(0, 1, (1, classes, n)).astype(np.float32)
    sc[0, :, 100:140] = 0.5                      # ties: by index
    s = cge.InferenceSession(nms_model(center).SerializeToString())
    for iou, thr in [(0.5, 0.1), (0.2, 0.0), (0.7, 0.9)]:
        feeds = {"b": bx, "s": sc, "m": np.array([max_out], np.int64),
                 "i": np.array([iou], np.float32), "t": np.array([thr], np.float32)}
        (y,) = s.run(None, feeds)
        want = greedy(bx, sc, max_out, np.float64(np.float32(iou)), np.float64(np.float32(thr)),
                      center)
        np.testing.assert_array_equal(y, want)
