"""Lab-style implementations (`module:Class`) used by the tests."""

import os
import time

import numpy as np

from harness.base import LeNet
from harness.registry import ImplSpec
from lenet_numpy.model import NumpyLeNet


class WrongLeNet(NumpyLeNet):
    """Right shape, wrong answers: the reference's probabilities rolled by one class."""

    spec = ImplSpec("wrong", "tests.fake_impls:WrongLeNet", "numpy", ("cpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        return np.roll(super().predict(images), 1, axis=1)


class SlightlyOffLeNet(NumpyLeNet):
    """Same argmax, but probabilities off by 1e-4: fails the 1e-5 tolerance."""

    spec = ImplSpec("off", "tests.fake_impls:SlightlyOffLeNet", "numpy", ("cpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        p = super().predict(images)
        return p + 1e-4 * (p == p.max(axis=1, keepdims=True))


class CrashingLeNet(LeNet):
    """Kills its own process on the call named by LENET_TEST_CRASH_AT (a worker crash)."""

    spec = ImplSpec("crash", "tests.fake_impls:CrashingLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.crash_at = int(os.environ.get("LENET_TEST_CRASH_AT", "5"))

    def predict(self, images):
        self.calls += 1
        if self.calls == self.crash_at:
            os._exit(9)  # as abrupt as a segfault in a native library
        return np.zeros((len(images), 10), np.float32)


class HangingLeNet(LeNet):
    """Hangs on its first call (a worker that never answers)."""

    spec = ImplSpec("hang", "tests.fake_impls:HangingLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        time.sleep(3600)


class HangingTrainer:
    """A training step that never comes: hangs as it is built."""

    def __init__(self, *args, **kwargs):
        time.sleep(3600)


class HangingTrainerLeNet(NumpyLeNet):
    """Answers as the reference; its trainer hangs (a verify-train child that never answers)."""

    spec = ImplSpec("hang_train", "tests.fake_impls:HangingTrainerLeNet", "numpy", ("cpu",), ("default",),
                    ("float32",), None, trainer="tests.fake_impls:HangingTrainer", train_variants=("default",))


class SleepyLeNet(LeNet):
    """2 ms per call: slow enough that a test can act while it runs."""

    spec = ImplSpec("sleepy", "tests.fake_impls:SleepyLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        time.sleep(0.002)
        return np.zeros((len(images), 10), np.float32)


class HungryLeNet(LeNet):
    """Touches 100 MB in every call and frees it: the bill's peak in calls must show it, its import
    and model stages must not."""

    spec = ImplSpec("hungry", "tests.fake_impls:HungryLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        block = np.ones(100 << 20, np.uint8)  # 100 MiB, every page written
        return np.full((len(images), 10), block[-1] / 10, np.float32)


class MemoryHogLeNet(LeNet):
    """Asks for a petabyte on its first call: the allocator refuses (an out-of-memory error)."""

    spec = ImplSpec("hog", "tests.fake_impls:MemoryHogLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        np.empty(1 << 50, np.uint8)
        return np.zeros((len(images), 10), np.float32)


class NullGpuLeNet(LeNet):
    """A second GPU implementation that needs no GPU: a second worker group on the 'GPU'."""

    spec = ImplSpec("nullgpu", "tests.fake_impls:NullGpuLeNet", "none", ("gpu",), ("default",),
                    ("float32",), None)

    def predict(self, images):
        return np.zeros((len(images), 10), np.float32)


class GatedLeNet(LeNet):
    """Answers its first LENET_TEST_GATE_AFTER calls at once, then waits before each call until
    the file named by LENET_TEST_GATE exists: a run that cannot end before the test says so,
    however fast or loaded the machine is."""

    spec = ImplSpec("gated", "tests.fake_impls:GatedLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.after = int(os.environ.get("LENET_TEST_GATE_AFTER", "250"))
        self.gate = os.environ.get("LENET_TEST_GATE", "")

    def predict(self, images):
        self.calls += 1
        while self.calls > self.after and not os.path.exists(self.gate):
            time.sleep(0.005)
        return np.zeros((len(images), 10), np.float32)


class ProcessDrawLeNet(LeNet):
    """Its speed depends on the process: the worker processes that load it claim 0, 1, 2, ... in
    order (a file each in LENET_TEST_DRAW_DIR), and process 1 sleeps 3 ms a call, the others 1 ms."""

    spec = ImplSpec("draw", "tests.fake_impls:ProcessDrawLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        folder = os.environ["LENET_TEST_DRAW_DIR"]
        index = 0
        while True:
            try:
                os.close(os.open(os.path.join(folder, str(index)), os.O_CREAT | os.O_EXCL))
                break
            except FileExistsError:
                index += 1
        self.seconds = 0.003 if index == 1 else 0.001

    def predict(self, images):
        time.sleep(self.seconds)
        return np.zeros((len(images), 10), np.float32)


class SleepyTwinLeNet(SleepyLeNet):
    """SleepyLeNet under another name: a second cell at the same speed."""

    spec = ImplSpec("sleepy_twin", "tests.fake_impls:SleepyTwinLeNet", "none", ("cpu",), ("default",),
                    ("float32",), None)


class FaultingLeNet(NumpyLeNet):
    """A GPU level's sticky error, on the CPU: its `bad` variant ends its process as a level does on
    one (harness.frameworks.gpu_fault.end: the line, exit code 86) on the call LENET_TEST_FAULT_AT
    names (default its first); `good` answers as NumPy does. LENET_TEST_FAULT_KIND=hung: a hang."""

    spec = ImplSpec("faulting", "tests.fake_impls:FaultingLeNet", "numpy", ("cpu",), ("bad", "good"),
                    ("float32", "float64"), None)

    calls = 0

    def predict(self, images):
        self.calls += 1
        if self.variant == "bad" and self.calls >= int(os.environ.get("LENET_TEST_FAULT_AT", "1")):
            from harness.frameworks import gpu_fault

            kind = os.environ.get("LENET_TEST_FAULT_KIND", "fault")
            gpu_fault.end(kind, "cudaErrorIllegalAddress (700) in a test's kernel" if kind == "fault"
                          else "a test's kernel: its GPU work still running 0.1 s after it was asked to end")
        return super().predict(images)
