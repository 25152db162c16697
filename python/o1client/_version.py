"""The package version, tied to libo1client's ABI.

The major number is the SOVERSION of the libo1client this package's
ctypes structures describe (client/CMakeLists.txt): the package loads
libo1client.so.<SOVERSION> and nothing else, because the caller-allocated
structs (struct o1_event above all) change size with it. The minor
number counts releases of the Python package for that ABI.
"""

SOVERSION = 3
CUDA_SOVERSION = 1
__version__ = f"{SOVERSION}.0.0"
