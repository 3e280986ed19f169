"""cuDNN descriptors for LeNet-5 at one batch size: one per tensor, filter, convolution,
activation and pooling. Creating and shaping them needs no GPU (only cudnnCreate does), so
this part is tested on any machine with libcudnn."""

import ctypes

from lenet_cudnn import binding as cu

EXPECTED = {  # NCHW shapes for batch n
    "x": lambda n: (n, 1, 28, 28),
    "c1": lambda n: (n, 6, 28, 28),
    "p1": lambda n: (n, 6, 14, 14),
    "c2": lambda n: (n, 16, 10, 10),
    "p2": lambda n: (n, 16, 5, 5),
}


class Descriptor:
    create = destroy = None

    def __init__(self, lib):
        self.lib = lib
        self.ptr = cu.Desc()
        getattr(lib, self.create)(ctypes.byref(self.ptr))

    def close(self):
        if self.ptr:
            getattr(self.lib, self.destroy)(self.ptr)
            self.ptr = cu.Desc()


class Tensor(Descriptor):
    create, destroy = "cudnnCreateTensorDescriptor", "cudnnDestroyTensorDescriptor"

    def __init__(self, lib, dims, data_type):
        super().__init__(lib)
        self.dims = tuple(dims)
        lib.cudnnSetTensor4dDescriptor(self.ptr, cu.TENSOR_NCHW, data_type, *self.dims)

    def read_back(self) -> tuple:
        """(n, c, h, w) as cuDNN stores them."""
        values = [cu.out_param() for _ in range(9)]
        self.lib.cudnnGetTensor4dDescriptor(self.ptr, *(ref for _, ref in values))
        return tuple(v.value for v, _ in values[1:5])


class Filter(Descriptor):
    create, destroy = "cudnnCreateFilterDescriptor", "cudnnDestroyFilterDescriptor"

    def __init__(self, lib, kcrs, data_type):
        super().__init__(lib)
        self.dims = tuple(kcrs)
        lib.cudnnSetFilter4dDescriptor(self.ptr, data_type, cu.TENSOR_NCHW, *self.dims)


class Convolution(Descriptor):
    create, destroy = "cudnnCreateConvolutionDescriptor", "cudnnDestroyConvolutionDescriptor"

    def __init__(self, lib, pad, data_type):
        super().__init__(lib)
        # pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w, mode, compute type
        lib.cudnnSetConvolution2dDescriptor(self.ptr, pad, pad, 1, 1, 1, 1,
                                            cu.CROSS_CORRELATION, data_type)
        lib.cudnnSetConvolutionMathType(self.ptr, cu.FMA_MATH)

    def output_dims(self, x: Tensor, w: Filter) -> tuple:
        values = [cu.out_param() for _ in range(4)]
        self.lib.cudnnGetConvolution2dForwardOutputDim(self.ptr, x.ptr, w.ptr, *(r for _, r in values))
        return tuple(v.value for v, _ in values)


class Pooling(Descriptor):
    create, destroy = "cudnnCreatePoolingDescriptor", "cudnnDestroyPoolingDescriptor"

    def __init__(self, lib):
        super().__init__(lib)
        # mode, NaN option, window h, w, padding h, w, stride h, w: max 2x2, stride 2
        lib.cudnnSetPooling2dDescriptor(self.ptr, cu.POOLING_MAX, cu.NOT_PROPAGATE_NAN,
                                        2, 2, 0, 0, 2, 2)

    def output_dims(self, x: Tensor) -> tuple:
        values = [cu.out_param() for _ in range(4)]
        self.lib.cudnnGetPooling2dForwardOutputDim(self.ptr, x.ptr, *(r for _, r in values))
        return tuple(v.value for v, _ in values)


class Relu(Descriptor):
    create, destroy = "cudnnCreateActivationDescriptor", "cudnnDestroyActivationDescriptor"

    def __init__(self, lib):
        super().__init__(lib)
        lib.cudnnSetActivationDescriptor(self.ptr, cu.ACTIVATION_RELU, cu.NOT_PROPAGATE_NAN, 0.0)


class LeNetDescriptors:
    """Every descriptor of the network for batch size n; output shapes asked of cuDNN and
    checked against LeNet-5's."""

    def __init__(self, lib, n: int, dtype="float32"):
        dt = cu.DATA_TYPES[dtype]
        self.n = n
        self.x = Tensor(lib, (n, 1, 28, 28), dt)
        self.w1, self.conv1 = Filter(lib, (6, 1, 5, 5), dt), Convolution(lib, 2, dt)  # "same"
        self.c1 = Tensor(lib, self.conv1.output_dims(self.x, self.w1), dt)
        self.pool = Pooling(lib)
        self.p1 = Tensor(lib, self.pool.output_dims(self.c1), dt)
        self.w2, self.conv2 = Filter(lib, (16, 6, 5, 5), dt), Convolution(lib, 0, dt)  # "valid"
        self.c2 = Tensor(lib, self.conv2.output_dims(self.p1, self.w2), dt)
        self.p2 = Tensor(lib, self.pool.output_dims(self.c2), dt)
        # dense outputs as (n, features, 1, 1): row-major (n, features), what sgemm writes
        self.fc = {name: Tensor(lib, (n, size, 1, 1), dt) for name, size in
                   (("fc1", 120), ("fc2", 84), ("fc3", 10))}
        self.bias = {name: Tensor(lib, (1, size, 1, 1), dt) for name, size in
                     (("conv1", 6), ("conv2", 16), ("fc1", 120), ("fc2", 84), ("fc3", 10))}
        self.relu = Relu(lib)
        for name, expected in EXPECTED.items():
            found = getattr(self, name).dims
            if found != expected(n):
                self.close()
                raise ValueError(f"cuDNN gives {name} shape {found}, LeNet-5 needs {expected(n)}")

    def all(self):
        return [self.x, self.w1, self.conv1, self.c1, self.pool, self.p1, self.w2, self.conv2,
                self.c2, self.p2, self.relu, *self.fc.values(), *self.bias.values()]

    def close(self):
        for d in self.all():
            d.close()
