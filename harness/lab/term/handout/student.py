"""`lenet-lab`, the command of a lab's student kit (harness/lab/term/handout/kit.py builds the kit): the
grader's gate, run in this process on the gate's test images against the oracle's answers shipped
precomputed, with the lab file's thresholds (harness.lab.judge.rules.timing.compare, as the grader), then the
time per image. No sandbox, no references, no rank: a laptop's check before handing in.

    lenet-lab check lenet.py      a first call (a shape error: the NCHW hint), the time per image
                                  against the lab's speed limit, then the gate (exit 0: it passes),
                                  and the peak memory; a GPU lab's under the GPU lock, where the
                                  machine has one
    lenet-lab emulate lenet.py    (the CUDA lab) the kernels compiled for the CPU, on a few images
    lenet-lab info                the lab, its gate and limits, the grader's versions
    lenet-lab doctor              what this machine has (Python, NumPy, BLAS, GPU) and where
    lenet-lab show N [lenet.py]   test image N in the terminal, beside both answers

Where nothing can be installed, the same from the unzipped kit's folder, with NumPy alone:
`python -m lenet_lab check lenet.py` (lenet_lab/__main__.py calls main here).

    Kit, load_kit(folder)                 the kit's data: the lab's numbers, the gate's images and answers
    submission_class(path, class_name)    the student's class, found as the grader finds it
    answers(impl, images, dtype, batch)   predict over the images, as float32 (N, 10)
    gate_numbers(kit, probs), passes(kit, gate), (the time per image: clock)
    check(path, kit, say, lock_timeout)   its lab kind's check (kit.json's checker): an inference lab's
        inference_check(path, kit, say, lock_timeout) (on the GPU under sharing.gpu_lock), checked(path,
        kit, say); a training lab's harness.lab.term.handout.trainkit.kit_check
    emulate(path, kit, say, images), main(argv), build(path, kit), (info: doctor)
    gate_line(kit, gate), first_call(impl, kit) (one predict first: a shape error gets the NCHW hint)
"""

import argparse
import contextlib
import importlib.util
import inspect
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness import ROOT
from harness.data import mnist
from harness.errors import HarnessError
from harness.lab.judge.rules import timing
from harness.lab.judge.rules.tables import Gate
from harness.lab.term.handout import clock, doctor, sharing

KIT_JSON = "kit.json"  # beside gate.npz in the kit's data folder (harness/_kit/)
GATE_NPZ = "gate.npz"
WRONG_HINT = ("Compare layer by layer with the description in README.md: the flatten order (NHWC), the "
              "padding ('same' for conv1) and the kernel layouts (HWIO) are the usual suspects.")


@dataclass(frozen=True)
class Kit:
    """What the kit was built with: the lab's numbers (kit.json) and the gate (gate.npz)."""

    lab: dict  # name, title, module, class, device, dtype, rank_by, gate {images, min_agree, max_abs_diff}
    images: np.ndarray  # (N, 28, 28) uint8: the gate's test images (training: its steps' images)
    oracle: np.ndarray  # (N, 10) float64: the oracle's probabilities (training: (steps, 61706) weights)
    weights: Path
    labels: np.ndarray | None = None  # training: the steps' labels, and the oracle's loss of each step
    losses: np.ndarray | None = None
    arrays: dict = field(default_factory=dict)  # training: the stages' and alt's (trainkit.key names them)


def load_kit(folder: Path = ROOT) -> Kit:
    """The kit's data folder (installed: harness/_kit/)."""
    folder = Path(folder)
    if not (folder / KIT_JSON).is_file():
        raise HarnessError(f"{folder / KIT_JSON}: missing; `lenet-lab` runs from an installed lab kit "
                           "(pip install ./lab-kit-LAB) or, from the unzipped kit's folder, `python -m "
                           "lenet_lab check lenet.py`; in the course's checkout use `python -m harness lab "
                           "check`")
    lab = json.loads((folder / KIT_JSON).read_text())
    with np.load(folder / GATE_NPZ) as gate:
        found = {key: gate[key] for key in gate.files}
    return Kit(lab, found["images"], found["oracle"], folder / "weights" / lab["weights"],
               found.get("labels"), found.get("losses"), found)


def submission_class(path: Path, class_name: str = "", base: type | None = None) -> type:
    """The named class, or the module's one harness.base.LeNet (or `base`: Trainer) subclass (the most
    derived), as the grader's worker finds it; the file's folder is importable, for its helper modules."""
    from harness.base import lenet_classes

    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    if spec is None or spec.loader is None:
        raise HarnessError(f"{path}: not a Python module")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod  # loaded afresh: a second check in one process sees the new file
    spec.loader.exec_module(mod)
    if class_name:
        if not inspect.isclass(getattr(mod, class_name, None)):
            raise HarnessError(f"{path}: no class {class_name!r}")
        return getattr(mod, class_name)
    leaves = lenet_classes(mod, base)
    if len(leaves) != 1:
        kind = getattr(base, "__name__", "LeNet")
        raise HarnessError(f"{path}: expected one harness.base.{kind} subclass, found "
                           f"{[c.__name__ for c in leaves]}")
    return leaves[0]


def build(path: Path, kit: Kit) -> Any:
    """The student's LeNet, built as the grader builds it (the kit's weights, the lab's device)."""
    from harness.registry import ImplSpec, lab_spec

    lab = kit.lab
    if path.name != lab["module"]:
        print(f"note: the grader imports {lab['module']}; this file is {path.name}", file=sys.stderr)
    from harness import base

    cls = submission_class(path, lab["class"], getattr(base, lab["base"]))  # its kind's: LeNet or Trainer
    if not isinstance(getattr(cls, "spec", None), ImplSpec):
        given: dict[str, Any] = {k: tuple(v) for k, v in lab["spec"].items()}  # its kind's spec fields
        cls.spec = replace(lab_spec(cls, lab["device"], lab["dtype"]), **given)  # type: ignore[attr-defined]
    return cls(str(kit.weights), device=lab["device"], dtype=lab["dtype"])


def answers(impl: Any, images_u8: np.ndarray, dtype: str, batch: int = timing.GATE_BATCH) -> np.ndarray:
    """float32 (N, 10): predict over the images in batches; a wrong shape is a HarnessError."""
    x, parts = mnist.to_input(images_u8, dtype), []
    for i in range(0, len(x), batch):
        out = np.asarray(impl.predict(x[i:i + batch]), dtype=np.float32)
        if out.shape != (len(x[i:i + batch]), 10):
            raise HarnessError(f"predict returned shape {out.shape} for {len(x[i:i + batch])} images; "
                               f"expected ({len(x[i:i + batch])}, 10)")
        parts.append(out)
    return np.concatenate(parts)


def gate_numbers(kit: Kit, probs: np.ndarray, count: int | None = None) -> dict:
    """The grader's gate numbers (agree, worst |dp|) on the first `count` images (default all)."""
    count = len(kit.oracle) if count is None else count
    return timing.compare(probs, kit.oracle[:count], kit.lab["gate"]["max_abs_diff"])


def passes(kit: Kit, gate: dict) -> bool:
    """The grader's rule (timing.gate_passes), on all the gate's images or on its first ones."""
    want = kit.lab["gate"]
    return timing.gate_passes(gate, want["images"], want["min_agree"], want["max_abs_diff"])


def gate_line(kit: Kit, gate: dict) -> str:
    want = kit.lab["gate"]
    return timing.gate_sentence(gate, Gate(want["images"], want["min_agree"], want["max_abs_diff"]))


def check(path: Path, kit: Kit, say: Callable[[str], None] = print,
          lock_timeout: float | None = None) -> bool:
    """The gate on every gate image, then the time per image; True when the grader's gate passes. On
    the GPU, under the GPU lock (waiting at most `lock_timeout` seconds; None: as long as it takes)."""
    lab = kit.lab
    say(f"lab {lab['name']}: {lab['title']}")
    module, _, function = lab["checker"].partition(":")  # its kind's check (kinds.Kind.checker)
    return bool(getattr(importlib.import_module(module), function)(path, kit, say, lock_timeout))


def inference_check(path: Path, kit: Kit, say: Callable[[str], None], lock_timeout: float | None) -> bool:
    """An inference lab's check: the gate on every gate image, then the time per image (check's)."""
    lab = kit.lab
    if lab["device"] == "gpu" and importlib.util.find_spec("cupy") is None:
        emulate_it = lab["emulate_hint"].format(module=path.name)
        raise HarnessError(f"lab {lab['name']} runs on an NVIDIA GPU through CuPy, which is not installed "
                           f"here (pip install cupy-cuda12x){emulate_it}")
    for warning in doctor.version_warnings(kit):
        say(warning)
    with sharing.gpu_lock(say, lock_timeout) if lab["device"] == "gpu" else contextlib.nullcontext():
        return checked(path, kit, say)


def checked(path: Path, kit: Kit, say: Callable[[str], None]) -> bool:
    """check's first call, timing, gate and peak memory."""
    lab = kit.lab
    impl = build(path, kit)
    try:
        first_call(impl, kit)
        median = clock.time_per_image(impl, kit.images, lab["dtype"])
        say(doctor.speed_line(kit, median))
        t0 = time.perf_counter()
        gate = gate_numbers(kit, answers(impl, kit.images, lab["dtype"]))
        say(gate_line(kit, gate) + f" ({time.perf_counter() - t0:.1f} s)")
    finally:
        getattr(impl, "close", lambda: None)()
    say(f"Peak memory of this check: {doctor.peak_mb():.0f} MiB (the kit's data included)"
        + (f"; the lab's limit: {lab['limits']['peak_mb']} MiB" if lab["limits"].get("peak_mb") else ""))
    if not passes(kit, gate):
        say("Status: wrong. " + WRONG_HINT)
        return False
    say(f"Status: passes the gate. The grader ranks by the ratio to {lab['rank_by']}, timed beside you on "
        "its own machine, on images you have not seen.")
    return True


def first_call(impl: Any, kit: Kit) -> None:
    """predict on one image, before anything else: a shape error there gets the NCHW hint."""
    try:
        answers(impl, kit.images[:1], kit.lab["dtype"])
    except Exception as exc:
        hint = doctor.shape_hint(exc)
        if hint:
            exc.add_note(f"lenet-lab: {hint}") if hasattr(exc, "add_note") else None
            print(f"HINT: {hint}", file=sys.stderr)
        raise


EMULATED_IMAGES = 50  # emulated kernels run one CUDA thread after another: seconds per image batch
CANNOT = ("What this cannot check: the GPU's memory model (races between threads, what a warp "
          "does), CuPy's own behaviour, and the time: run `lenet-lab check lenet.py` on a machine "
          "with a GPU and CuPy for the full gate and the time per image.")


def emulate(path: Path, kit: Kit, say: Callable[[str], None] = print, images: int = EMULATED_IMAGES) -> bool:
    """The CUDA lab without a GPU: the submission's kernels compiled by g++ for the CPU behind a fake
    CuPy (harness.lab.emucuda), on the first `images` gate images; True when they pass the gate's
    rule there and no kernel wrote past a buffer."""
    import tempfile

    from harness.lab import emucuda

    count = min(images, len(kit.images))
    with tempfile.TemporaryDirectory(prefix="lenet-lab-emu-") as tmp:
        fake = emucuda.LabCupy(Path(tmp))
        real = sys.modules.get("cupy")
        sys.modules["cupy"] = fake  # type: ignore[assignment]
        try:
            impl = build(path, kit)
            probs = answers(impl, kit.images[:count], kit.lab["dtype"], batch=count)
            fake.check_guards()
        finally:
            if real is not None:
                sys.modules["cupy"] = real
            else:
                sys.modules.pop("cupy", None)
    gate = gate_numbers(kit, probs, count)
    say(f"Emulated on the CPU ({count} of the gate's {len(kit.images)} images): " + gate_line(kit, gate))
    ok = passes(kit, gate)
    say(("Status: the kernels pass on these images. " if ok else "Status: wrong. " + WRONG_HINT + " ")
        + CANNOT)
    return ok


def main(argv: list[str] | None = None) -> int:
    """`lenet-lab check|emulate|info`: 0 passes, 1 fails (wrong, crashed), 2 bad input."""
    import traceback

    parser = argparse.ArgumentParser(prog="lenet-lab", description="check a lab submission before handing in")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("check", "the grader's gate on the test images, then the time per image"),
                       ("emulate", "(CUDA lab, no GPU needed) the kernels compiled for the CPU")):
        one = sub.add_parser(name, help=text)
        one.add_argument("path", type=Path, help="your lenet.py (or the folder holding it)")
        if name == "emulate":
            one.add_argument("--images", type=int, default=EMULATED_IMAGES)
        else:
            one.add_argument("--lock-timeout", type=float, default=None, metavar="S",
                             help="(a GPU lab on a shared server) wait at most S seconds for the GPU "
                                  "lock, then check anyway (default: wait)")
    sub.add_parser("info", help="the lab, its gate and limits, the grader's versions")
    sub.add_parser("doctor", help="what this machine has (Python, NumPy, BLAS, GPU) and where it lives")
    show = sub.add_parser("show", help="test image N in the terminal, beside the reference's answer "
                          "(and yours)")
    show.add_argument("n", type=int, help="the test image's number (a failed gate names the first ones)")
    show.add_argument("path", type=Path, nargs="?", help="your lenet.py, to show its answer too")
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            doctor.doctor()
            return 0
        kit = load_kit()
        if args.command == "info":
            doctor.info(kit)
            return 0
        if args.command == "show":
            image = kit.images[args.n:args.n + 1]
            probs = answers(build(args.path.resolve(), kit), image, kit.lab["dtype"])[0] \
                if args.path and 0 <= args.n < len(kit.images) else None
            doctor.show(kit, args.n, probs)
            return 0
        path = args.path / kit.lab["module"] if args.path.is_dir() else args.path
        if not path.is_file():
            raise HarnessError(f"{path}: no such file (expected your {kit.lab['module']})")
        path = path.resolve()
        ok = check(path, kit, print, args.lock_timeout) if args.command == "check" else \
            emulate(path, kit, print, args.images)
        return 0 if ok else 1
    except HarnessError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 2
    except Exception:  # the submission's own error: the student needs the traceback
        traceback.print_exc()
        print("Status: crashed (the traceback above shows where).")
        return 1


if __name__ == "__main__":  # python -m harness.lab.term.handout.student check lenet.py (no install)
    raise SystemExit(main())
