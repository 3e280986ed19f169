"""The CUDA lab's handout (harness.lab.judge.rules.kinds.KERNELS): an inference lab's README with a
section on checking kernels without a GPU (`lenet-lab emulate`); its gate data and advice are an
inference lab's (harness.lab.term.handout.kit).

    readme(lab), cuda_readme(lab) (its section), gate_data(lab, weights), next_step(row, lab)
"""

from harness.lab.judge.rules.assignment import Lab
from harness.lab.term.handout import kit
from harness.lab.term.handout.kit import gate_data, next_step

__all__ = ["gate_data", "next_step", "readme"]


def readme(lab: Lab) -> str:
    return kit.readme(lab, cuda_readme(lab))


def cuda_readme(lab: Lab) -> list[str]:
    return [
        "## The CUDA lab without a GPU", "",
        "`lenet.cu` holds the kernels (yours); `lenet.py` is the glue (compiles `lenet.cu` with NVRTC "
        "through CuPy). On a machine with an NVIDIA GPU: `pip install cupy-cuda12x`, then "
        "`lenet-lab check lenet.py`. Without a GPU (needs g++ 11 or newer):", "",
        "```sh", "lenet-lab emulate lenet.py", "```", "",
        "compiles your kernels for the CPU (every block and thread of a launch run in turn, arrays "
        "guarded against reads and writes past their ends) and runs the gate's rule on the first 50 "
        "test images (`--images N` for more). What it cannot check: the GPU's memory model (races "
        "between threads, warps), CuPy's own behaviour, and the time. Run `lenet-lab check` on a GPU "
        "before handing in if you can.", ""]
