# `python3 -m cge --version`: the package's version, where it was imported
# from, and the C library's (its cge_version(), when the library has one).
import argparse
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m cge",
                                 description="cge, a graph engine: the Python package")
    ap.add_argument("--version", action="store_true",
                    help="print the package's and the C library's versions")
    args = ap.parse_args(argv)
    if not args.version:
        ap.print_help()
        return 0
    import cge
    lv = cge.library_version()
    print("cge %s (python package, %s)" % (cge.__version__, cge.__file__))
    print("libcge %s (%s)" % (lv if lv else "(version not reported)", cge.library_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
