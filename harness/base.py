"""The one interface between the harness and an implementation (DESIGN.md).

    impl = SomeLeNet(weights_path, device="cpu", variant="tuned", dtype="float32")
    probs = impl.predict(images)          # (N, 28, 28, 1) float -> (N, 10) on the host
    impl.last_device_time_ns()            # GPU time of the last predict, or None

`predict` returns only when the result is on the host, so GPU work is finished when the
harness reads its clock. A class names its ImplSpec (devices, variants, dtypes); built-in
ones take theirs from harness.registry, a lab's class writes its own.
"""

import numpy as np

from harness.registry import ImplSpec


class LeNet:
    spec: ImplSpec

    def __init__(self, weights_path, device="cpu", variant=None, dtype="float32"):
        variant = variant or self.spec.variants[0]
        for field, value, allowed in (
            ("device", device, self.spec.devices),
            ("variant", variant, self.spec.variants_for(device)),
            ("dtype", dtype, self.spec.dtypes),
        ):
            if value not in allowed:
                raise ValueError(
                    f"{self.spec.name}: unknown {field} {value!r}; expected one of {list(allowed)}"
                )
        self.weights_path = weights_path
        self.device = device
        self.variant = variant
        self.dtype = dtype

    def predict(self, images: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def last_device_time_ns(self) -> int | None:
        """Device (GPU) time of the last predict, where the implementation measures it."""
        return None

    def close(self) -> None:
        """Free device memory and handles."""
