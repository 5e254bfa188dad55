# cge.quantize: the Python face of cge_onnx_quantize (include/cge/onnx.h). The
# quantizing is the C library's; this module turns calibration data (numpy
# arrays, or a folder of .npy files in the CLI's layouts) into cge tensors.
import ctypes
import os
import re

import numpy as np

from . import _lib
from ._session import Error, _check, _make_shape, numpy_to_dtype

_METHODS = {"minmax": 0, "entropy": 1, "percentile": 2}


class QuantizeOptions(ctypes.Structure):
    # Mirrors cge_quantize_options (onnx.h).
    _fields_ = [("samples", ctypes.POINTER(_lib.Tensor)), ("num_samples", ctypes.c_int32),
                ("inputs_per_sample", ctypes.c_int32), ("method", _lib.c_enum),
                ("per_channel", ctypes.c_bool), ("percentile", ctypes.c_double),
                ("weights_only_bits", ctypes.c_int32), ("block_size", ctypes.c_int32),
                ("exclude", ctypes.POINTER(ctypes.c_char_p)), ("num_exclude", ctypes.c_int32),
                ("num_threads", ctypes.c_int), ("weights_only_format", ctypes.c_int32),
                ("activation_type", ctypes.c_int32)]


class QuantizeReport(ctypes.Structure):
    # Mirrors cge_quantize_report (onnx.h).
    _fields_ = [("nodes_quantized", ctypes.c_int32), ("activations", ctypes.c_int32),
                ("weights", ctypes.c_int32), ("relu_folded", ctypes.c_int32),
                ("nodes_left_float", ctypes.c_int32), ("opset_in", ctypes.c_int64),
                ("opset_out", ctypes.c_int64), ("warning", ctypes.c_char * 256)]


_fn = _lib.lib.cge_onnx_quantize
_fn.restype = _lib.c_enum
_fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(QuantizeOptions),
                ctypes.POINTER(QuantizeReport)]
for _name, _res, _args in (("cge_graph_num_inputs", ctypes.c_int32, [ctypes.c_void_p]),
                           ("cge_graph_input", ctypes.c_char_p, [ctypes.c_void_p, ctypes.c_int32])):
    getattr(_lib.lib, _name).restype = _res
    getattr(_lib.lib, _name).argtypes = _args


def _input_names(model):
    g = ctypes.c_void_p()
    _check(_lib.lib.cge_onnx_import_file(os.fsencode(model), None, ctypes.byref(g)), "import")
    try:
        return [_lib.lib.cge_graph_input(g, i).decode()
                for i in range(_lib.lib.cge_graph_num_inputs(g))]
    finally:
        _lib.lib.cge_graph_destroy(g)


def _io_error(msg):
    from .errors import CgeIOError
    return CgeIOError("[io] " + msg, "io", "CGE_ERR_IO")


def load_calibration_dir(path, input_names):
    """Samples (a list of {input: array}) from a folder in the layouts `cge
    quantize --calibrate` reads: DIR/<sample>/<input>.npy, DIR/<input>_<k>.npy,
    or (one input) DIR/*.npy."""
    if not os.path.isdir(path):
        raise _io_error("%s: cannot open the calibration folder: no such directory" % path)
    entries = sorted(e for e in os.listdir(path) if not e.startswith("."))
    subs = [e for e in entries if os.path.isdir(os.path.join(path, e))]
    if subs:
        return [{n: np.load(os.path.join(path, s, n + ".npy")) for n in input_names}
                for s in subs]
    files = [e for e in entries if e.endswith(".npy")]
    if not files:
        raise _io_error("%s: no .npy files and no sample folders" % path)
    pat = [(n, re.compile(re.escape(n) + r"_(\d+)\.npy$")) for n in input_names]
    ks = []
    for f in files:
        k = next((int(m.group(1)) for _, p in pat for m in [p.match(f)] if m), None)
        ks.append(k)
    if all(k is not None for k in ks):
        return [{n: np.load(os.path.join(path, "%s_%d.npy" % (n, k))) for n in input_names}
                for k in range(max(ks) + 1)]
    if len(input_names) != 1:
        raise _io_error("%s: the model has %d inputs: name the files <input>_<k>.npy or use a "
                        "folder per sample" % (path, len(input_names)))
    return [{input_names[0]: np.load(os.path.join(path, f))} for f in files]


def quantize(model, output, calibrate=None, method="minmax", per_channel=False,
             percentile=None, weights_only=None, block_size=None, exclude=(), threads=0,
             weights_format="nbits", activations="uint8"):
    """Quantize the ONNX model at `model` into `output` with cge's quantizer
    (the same C code as `cge quantize`). `calibrate`: a folder of .npy files
    (the CLI's layouts) or an iterable of {input_name: numpy array} samples;
    needed unless `weights_only` is "int8" or "int4" (MatMulNBits, or with
    weights_format="qdq" DequantizeLinear with block_size, opset 21).
    `activations`: "uint8" (with zero points, the default), "int8" or
    "int8-symmetric" (zero point 0). Returns a dict of what was done (nodes,
    activations, weights, opsets, warning)."""
    if method not in _METHODS:
        raise ValueError("method is one of %s, not %r" % (sorted(_METHODS), method))
    bits = {None: 0, "int8": 8, "int4": 4, 8: 8, 4: 4}.get(weights_only)
    if bits is None:
        raise ValueError("weights_only is 'int8' or 'int4', not %r" % (weights_only,))
    if weights_format not in ("nbits", "qdq"):
        raise ValueError("weights_format is 'nbits' or 'qdq', not %r" % (weights_format,))
    acts = {"uint8": 0, "int8": 1, "int8-symmetric": 2}.get(activations)
    if acts is None:
        raise ValueError("activations is 'uint8', 'int8' or 'int8-symmetric', not %r"
                         % (activations,))
    model, output = os.fspath(model), os.fspath(output)
    o = QuantizeOptions(method=_METHODS[method], per_channel=bool(per_channel),
                        percentile=float(percentile or 0), weights_only_bits=bits,
                        block_size=int(block_size or 0), num_threads=int(threads),
                        weights_only_format=1 if weights_format == "qdq" else 0,
                        activation_type=acts)
    keep = []
    if not bits:
        if calibrate is None:
            raise ValueError("calibrate (a folder or a list of samples) is needed unless "
                             "weights_only is given")
        if isinstance(calibrate, (str, bytes, os.PathLike)):
            calibrate = load_calibration_dir(os.fspath(calibrate), _input_names(model))
        samples = [dict(s) for s in calibrate]
        if not samples:
            raise _io_error("no calibration samples")
        names = list(samples[0])
        n = len(names)
        arr = (_lib.Tensor * (len(samples) * n))()
        for k, s in enumerate(samples):
            if sorted(s) != sorted(names):
                raise _io_error("calibration sample %d names %s; sample 0 names %s"
                                % (k, sorted(s), sorted(names)))
            for i, name in enumerate(names):
                a = np.ascontiguousarray(s[name])
                keep.append(a)
                bname = name.encode()
                keep.append(bname)
                t = arr[k * n + i]
                t.name, t.dtype, t.shape = bname, numpy_to_dtype(a.dtype), _make_shape(a.shape)
                t.data, t.bytes = a.ctypes.data, a.nbytes
        o.samples, o.num_samples, o.inputs_per_sample = arr, len(samples), n
    ex = [e.encode() for e in exclude]
    ex_arr = (ctypes.c_char_p * max(len(ex), 1))(*ex)
    o.exclude, o.num_exclude = ex_arr, len(ex)
    r = QuantizeReport()
    _check(_fn(os.fsencode(model), os.fsencode(output), ctypes.byref(o), ctypes.byref(r)),
           "quantize")
    return {"nodes_quantized": r.nodes_quantized, "activations": r.activations,
            "weights": r.weights, "relu_folded": r.relu_folded,
            "nodes_left_float": r.nodes_left_float, "opset_in": r.opset_in,
            "opset_out": r.opset_out, "warning": r.warning.decode()}


__all__ = ["quantize", "load_calibration_dir", "Error"]
