"""lenet_cuda.registered: which caller arrays batch2 registers with the device, for how long, and
the address it hands the kernel; a runtime that records its calls stands in for CUDA's."""

import gc
import types

import numpy as np
import pytest

from lenet_cuda.registered import HOST_REGISTER_MAPPED, Registered, owner_of


class Runtime:
    """cudaHostRegister and friends as a log; `refuse` makes hostRegister fail as CUDA's can."""

    def __init__(self, refuse=False):
        self.calls, self.live, self.refuse = [], {}, refuse

    def hostRegister(self, base, nbytes, flags):  # noqa: N802 (CuPy's name)
        self.calls.append(("register", base, nbytes))
        assert flags & HOST_REGISTER_MAPPED
        if self.refuse:
            raise RuntimeError("cudaErrorHostMemoryAlreadyRegistered")
        self.live[base] = nbytes

    def hostUnregister(self, base):  # noqa: N802
        self.calls.append(("unregister", base))
        del self.live[base]

    def pointerGetAttributes(self, ptr):  # noqa: N802
        return types.SimpleNamespace(devicePointer=ptr + 1_000_000)  # a device address apart from the host's


def images(n=20, dtype=np.float32):
    return np.arange(n * 784, dtype=dtype).reshape(n, 28, 28)[..., np.newaxis]  # a view, as mnist.to_input's


def test_the_owner_is_registered_on_its_second_call_and_every_slice_is_an_offset_into_it():
    rt, x = Runtime(), images()
    reg = Registered(rt, "float32")
    owner = owner_of(x)
    assert owner is x.base and owner.base is None and owner.nbytes == x.nbytes  # the arange behind both views
    assert reg.device_pointer(x[0:4]) is None and rt.calls == []  # seen once: copied
    assert reg.device_pointer(x[4:8]) == x[4:8].ctypes.data + 1_000_000  # seen again: registered
    assert reg.device_pointer(x[12:20]) == owner.ctypes.data + 12 * 784 * 4 + 1_000_000
    assert rt.calls == [("register", owner.ctypes.data, owner.nbytes)]  # once, the whole owner


def test_fresh_arrays_are_never_registered_and_odd_ones_always_copied():
    rt, reg = Runtime(), Registered(Runtime(), "float32")
    reg.rt = rt
    for _ in range(3):
        assert reg.device_pointer(images().copy()) is None  # a new array every call: each seen once
    x = images()
    assert reg.device_pointer(x[::2]) is None and reg.device_pointer(x[::2]) is None  # not contiguous
    y = images(dtype=np.float64)
    assert reg.device_pointer(y) is None and reg.device_pointer(y) is None  # not the level's dtype
    assert rt.calls == []


def test_an_owner_that_dies_is_unregistered_before_its_memory_goes():
    rt = Runtime()
    reg = Registered(rt, "float32")
    x = images()
    reg.device_pointer(x)
    reg.device_pointer(x)
    base = x.ctypes.data
    assert rt.live == {base: x.nbytes}
    del x
    gc.collect()
    assert rt.calls[-1] == ("unregister", base) and rt.live == {} and reg.live == {}


def test_at_most_capacity_owners_stay_registered_the_least_recently_used_going_first():
    rt = Runtime()
    reg = Registered(rt, "float32", capacity=2)
    a, b, c = images(), images(), images()
    for arr in (a, a, b, b, a, c, c):  # a used again after b: b is the least recently used when c comes
        reg.device_pointer(arr)
    assert set(rt.live) == {a.ctypes.data, c.ctypes.data}
    assert ("unregister", b.ctypes.data) in rt.calls
    reg.close()
    assert rt.live == {} and reg.live == {}
    del a, b, c
    gc.collect()
    assert sum(1 for call in rt.calls if call[0] == "unregister") == 3  # each once: finalizers ran at most once


def test_an_owner_the_runtime_refuses_is_copied_from_then_on_without_asking_again():
    rt = Runtime(refuse=True)
    reg = Registered(rt, "float32")
    x = images()
    assert [reg.device_pointer(x) for _ in range(4)] == [None] * 4
    assert rt.calls == [("register", x.ctypes.data, x.nbytes)]


@pytest.mark.parametrize("kind", ["C", "F"])
def test_an_owner_in_one_block_of_memory_counts_whatever_its_order(kind):
    rt = Runtime()
    reg = Registered(rt, "float32")
    owner = np.zeros((28, 28, 40), np.float32, order=kind)
    view = owner[:, :, :1] if kind == "C" else None  # a C owner's slice along its last axis is not contiguous
    if view is not None:
        assert reg.device_pointer(view) is None
    flat = owner.reshape(-1, order="A")[:784 * 4].reshape(4, 28, 28, 1)  # a contiguous view into the owner
    reg.device_pointer(flat)
    assert reg.device_pointer(flat) == flat.ctypes.data + 1_000_000
