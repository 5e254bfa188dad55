# Makes `import cge` work from the source tree (python/ on sys.path); the
# package finds libcge.so through $CGE_LIBRARY or ../../build/libcge.so.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
