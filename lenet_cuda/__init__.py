"""The hand-written CUDA level: LeNet-5 in CUDA C (.cu), compiled at run time by NVRTC through CuPy."""
