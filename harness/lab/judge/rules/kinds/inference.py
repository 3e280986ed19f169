"""The inference kind: a lab whose students write `predict`, gated on test images beside the NumPy oracle
(its behaviour is the base Kind's); and its variant for a rung whose level has the `kernels` hook, the
CUDA kernels kind, whose kit ships the CPU emulation.

    Inference, INFERENCE (its KIND)   an inference lab
    Kernels, KERNELS                  the CUDA kernels lab (Inference.for_rung gives it)
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.lab.judge.rules.kinds._base import Kind


@dataclass(frozen=True)
class Inference(Kind):
    """An inference lab (Kind's defaults)."""

    def for_rung(self, rung: str) -> Kind:
        """The kernels kind where the rung's level has the `kernels` hook (its doctor compiles with
        NVRTC); else itself."""
        from harness import registry

        kernels = any(spec.api_level == rung and "kernels" in dict(spec.hooks)
                      for spec in registry.REGISTRY.values())
        return KERNELS if kernels else self


@dataclass(frozen=True)
class Kernels(Inference):
    """The CUDA kernels lab: an inference lab whose students write CUDA C kernels (the rung's level has
    the `kernels` hook); its kit ships the CPU emulation (`lenet-lab emulate`)."""

    name: str = "inference"
    handout: str = "harness.lab.term.handout.cudareadme"  # an inference README, and `lenet-lab emulate`
    kit_files: tuple[str, ...] = ("harness/lab/emucuda.py", "harness/lab/cuda_emu.h")
    emulate_hint: str = "; without a GPU: lenet-lab emulate {module}"


    def for_rung(self, rung: str) -> Kind:
        return self


INFERENCE = KIND = Inference()
KERNELS = Kernels()
