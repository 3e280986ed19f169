"""The PyTorch ops level: LeNet-5 written with torch.nn.functional; the GPU peer of cuDNN."""
