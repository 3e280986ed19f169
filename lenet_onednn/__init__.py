"""The raw oneDNN level: the oneDNN v3 C API through ctypes, on the CPU (cuDNN's twin)."""
