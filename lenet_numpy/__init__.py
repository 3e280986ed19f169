"""The reference level: LeNet-5 in NumPy (im2col + BLAS matmul). The correctness oracle."""
