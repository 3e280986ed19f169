"""The caller's image arrays page-locked and mapped in place (cudaHostRegister), once per array, so
the batch2 variants read them across the bus (zero copy) or copy them at the bus's full rate,
instead of the host copying 1.6 MB a call into page-locked memory first (issue 73: 171-177 µs of
batch's 239 µs call at batch 512).

What is registered is the memory of the array that owns the images, not the call's view of it: the
harness passes each call a different slice of one (10000, 28, 28) array, so that array is
registered once and every slice is an offset into it. An owner is registered the second time a
call brings it (the first call copies): an array seen once, as a caller that builds a fresh array
every call brings them, is never registered, since registering costs more than one copy (page
pinning, ~ms for MBs). At most CAPACITY owners stay registered (the least recently used is
unregistered); an owner's registration ends before its memory is freed (weakref.finalize runs as
the array is deallocated, before its buffer goes) or at close. Arrays that are not C-contiguous
or not of the level's dtype, views whose owner is not one contiguous block, and owners the runtime
refuses (pages already registered by someone else) are copied: device_pointer returns None.
"""

import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

HOST_REGISTER_PORTABLE, HOST_REGISTER_MAPPED = 1, 2  # cudaHostRegister flags
CAPACITY = 4  # owners kept registered at once


def owner_of(array: np.ndarray) -> np.ndarray:
    """The outermost ndarray behind a view: the one whose lifetime holds the memory."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class Registered:
    """runtime: CuPy's cupy.cuda.runtime (hostRegister, hostUnregister, pointerGetAttributes)."""

    def __init__(self, runtime: Any, dtype: str, capacity: int = CAPACITY) -> None:
        self.rt, self.dtype, self.capacity = runtime, np.dtype(dtype), capacity
        self.live: OrderedDict[tuple[int, int], tuple[weakref.ref, int, weakref.finalize]] = OrderedDict()
        self.seen: dict[tuple[int, int], weakref.ref] = {}  # owners seen once: registered if seen again
        self.refused: dict[tuple[int, int], weakref.ref] = {}  # the runtime said no: copied from then on

    def device_pointer(self, images: np.ndarray) -> int | None:
        """The device's address of images (in their owner's registered memory), or None: copy them."""
        if images.dtype != self.dtype or not images.flags.c_contiguous:
            return None
        owner = owner_of(images)
        if not (owner.flags.c_contiguous or owner.flags.f_contiguous):
            return None
        base = owner.ctypes.data
        key = (base, owner.nbytes)
        entry = self.live.get(key)
        if entry is not None and entry[0]() is owner:
            self.live.move_to_end(key)  # the most recently used
            return entry[1] + images.ctypes.data - base
        if self.alive_in(self.refused, key, owner):
            return None
        if not self.alive_in(self.seen, key, owner):
            self.seen[key] = weakref.ref(owner)
            return None
        del self.seen[key]
        if not self.register(owner, key):
            return None
        return self.live[key][1] + images.ctypes.data - base

    @staticmethod
    def alive_in(table: dict, key: tuple[int, int], owner: np.ndarray) -> bool:
        """Whether table holds this very owner under key (a dead one's entry is dropped)."""
        ref = table.get(key)
        if ref is not None and ref() is not owner:
            del table[key]
            ref = None
        return ref is not None

    def register(self, owner: np.ndarray, key: tuple[int, int]) -> bool:
        while len(self.live) >= self.capacity:
            _, (_, _, finalizer) = self.live.popitem(last=False)
            finalizer()
        base, nbytes = key
        try:
            self.rt.hostRegister(base, nbytes, HOST_REGISTER_PORTABLE | HOST_REGISTER_MAPPED)
        except Exception:  # CUDARuntimeError: pages already registered, too much pinned memory
            self.refused[key] = weakref.ref(owner)
            return False
        try:
            device = int(self.rt.pointerGetAttributes(base).devicePointer)
        except Exception:
            self.rt.hostUnregister(base)
            raise
        finalizer = weakref.finalize(owner, unregister, self.rt, base, self.live, key)
        finalizer.atexit = False  # at exit the process's CUDA context goes, registrations with it
        self.live[key] = (weakref.ref(owner), device, finalizer)
        return True

    def close(self) -> None:
        """Every registration ended (the level's close; its stream synchronized first)."""
        for _, _, finalizer in list(self.live.values()):
            finalizer()
        self.live.clear()
        self.seen.clear()
        self.refused.clear()


def unregister(runtime: Any, base: int, live: dict, key: tuple[int, int]) -> None:
    """The registration of base ended (its owner freed, evicted, or the level closed); holds no
    reference to the owner, so the owner can die."""
    live.pop(key, None)
    runtime.hostUnregister(base)
