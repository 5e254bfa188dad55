#!/usr/bin/env python3
# Opset coverage: every (operator, version) of the default ONNX domain that
# opsets 7-18 resolve to, checked against the converters cge registers; lists
# the pairs cge lacks and fails on any not in opset_missing.txt (with a reason).
"""Usage: opset_coverage.py [--missing FILE] [--update] [-v]

A pair (op, V) is covered when the importer finds an ONNX converter for op at
opset V whose target operator is defined. onnx 1.12 knows opsets up to 17;
opset 18's new and changed operators are listed below by hand (onnx 1.13's
changelog), and for those the converter found must itself start at 18: an
older definition whose range merely stays open does not know what 18 changed.
"""
import argparse
import ctypes
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MISSING_LIST = os.path.join(HERE, "opset_missing.txt")
FIRST_OPSET, LAST_OPSET = 7, 18

# Operators opset 18 added or changed (onnx 1.13's Changelog.md).
OPSET18 = (
    "BitwiseAnd BitwiseNot BitwiseOr BitwiseXor CenterCropPad Col2Im GroupNormalization "
    "LpPool Mish OptionalGetElement OptionalHasElement Pad ReduceL1 ReduceL2 ReduceLogSum "
    "ReduceLogSumExp ReduceMax ReduceMean ReduceMin ReduceProd ReduceSumSquare Resize "
    "ScatterElements ScatterND Split").split()
# The importer reads Constant nodes itself (every value_* form); no converter.
IMPORTER_NATIVE = {"Constant"}


def onnx_pairs():
    """Sorted (op, since_version) pairs opsets FIRST..LAST resolve to."""
    from onnx import defs
    names = {s.name for s in defs.get_all_schemas_with_history() if s.domain == ""}
    pairs = set()
    for name in names:
        for opset in range(FIRST_OPSET, min(LAST_OPSET, defs.onnx_opset_version()) + 1):
            try:
                s = defs.get_schema(name, opset, "")
            except Exception:  # not defined yet at this opset
                continue
            if not s.deprecated:
                pairs.add((name, s.since_version))
    if defs.onnx_opset_version() < 18:
        pairs.update((name, 18) for name in OPSET18)
    return sorted(pairs)


class _Converter(ctypes.Structure):
    # Mirrors cge_converter_def (include/cge/op.h).
    _fields_ = [("front_end", ctypes.c_char_p), ("source_op", ctypes.c_char_p),
                ("source_domain", ctypes.c_char_p), ("since_version", ctypes.c_int32),
                ("end_version", ctypes.c_int32), ("target_op", ctypes.c_char_p),
                ("target_domain", ctypes.c_char_p), ("convert", ctypes.c_void_p)]


def cge_lookup():
    """A function (op, version) -> the since_version of cge's converter, or None."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    from cge import _lib
    # A handle of its own: prototypes set here must not change those of the
    # cge package's handle (the same library, loaded once).
    lib = ctypes.CDLL(_lib.path)
    lib.cge_onnx_register_converters.restype = ctypes.c_int
    if lib.cge_onnx_register_converters() != 0:
        raise SystemExit("cge_onnx_register_converters failed")
    find = lib.cge_converter_find
    find.restype = ctypes.POINTER(_Converter)
    find.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64]
    op_find = lib.cge_op_find
    op_find.restype = ctypes.c_void_p
    op_find.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int32]

    def lookup(op, version):
        c = find(b"onnx", b"", op.encode(), version)
        if not c:
            return None
        c = c.contents
        if not op_find(c.target_domain or b"", c.target_op, 0):
            return None
        return c.since_version
    return lookup


def missing_pairs():
    lookup = cge_lookup()
    out = []
    for op, v in onnx_pairs():
        if op in IMPORTER_NATIVE:
            continue
        since = lookup(op, v)
        if since is None or (v == 18 and op in OPSET18 and since < 18):
            out.append((op, v))
    return out


def read_missing_list(path=MISSING_LIST):
    """{(op, version): reason} from lines 'Op-V: reason' ('#' starts a comment)."""
    listed = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            key, _, reason = line.partition(":")
            op, _, v = key.strip().rpartition("-")
            listed[(op, int(v))] = reason.strip()
    return listed


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--missing", default=MISSING_LIST)
    ap.add_argument("--update", action="store_true",
                    help="drop covered pairs from the list (new gaps still need a reason)")
    ap.add_argument("-v", action="store_true")
    args = ap.parse_args()
    pairs = onnx_pairs()
    missing = missing_pairs()
    listed = read_missing_list(args.missing)
    print("%d of %d (operator, version) pairs of opsets %d-%d missing"
          % (len(missing), len(pairs), FIRST_OPSET, LAST_OPSET))
    for op, v in missing:
        print("  %s-%d: %s" % (op, v, listed.get((op, v), "(no reason listed)")))
    unlisted = [p for p in missing if p not in listed]
    covered = [p for p in listed if p not in missing]
    if args.update and covered:
        with open(args.missing) as f:
            lines = f.readlines()
        keep = [ln for ln in lines
                if not any(ln.startswith("%s-%d:" % p) for p in covered)]
        with open(args.missing, "w") as f:
            f.writelines(keep)
        print("dropped from %s: %s" % (args.missing, ", ".join("%s-%d" % p for p in covered)))
        covered = []
    for op, v in covered:
        print("listed as missing but covered (run with --update): %s-%d" % (op, v))
    for op, v in unlisted:
        print("missing without a reason in %s: %s-%d" % (args.missing, op, v))
    return 1 if unlisted or covered else 0


if __name__ == "__main__":
    sys.exit(main())
