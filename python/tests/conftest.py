# Makes `import cge` work from the source tree (python/ on sys.path); the
# package finds libcge.so through $CGE_LIBRARY or ../../build/libcge.so.
# Test dependencies are required, never a reason to skip (see REQUIRED).
import importlib
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

# What the tests import, and the Debian package scripts/install-deps.sh
# (`make deps`, part of `make test`) installs it from. A test that skipped
# without one would pass while testing nothing.
REQUIRED = {"numpy": "python3-numpy", "onnx": "python3-onnx", "torch": "python3-torch",
            "torchvision": "python3-torchvision"}


def pytest_configure(config):
    missing = []
    for module, package in REQUIRED.items():
        try:
            importlib.import_module(module)
        except ImportError as e:
            missing.append("%s (%s: %s)" % (module, package, e))
    if missing:
        raise pytest.UsageError("cge's Python tests need %s; `make deps` installs them (with "
                                "%s)" % (", ".join(missing), sys.executable))
