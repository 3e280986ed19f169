"""The hand-written CPU level: LeNet-5 as loops over each layer's index arithmetic (kernels.py),
compiled for this CPU by Numba (LLVM) on the first call: the CPU's twin of lenet_cuda."""
