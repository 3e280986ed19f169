"""The raw cuDNN level: the cuDNN C API through ctypes, CuPy device memory, cuBLAS sgemm."""
