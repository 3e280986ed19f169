"""A GPU process's end where its context can no longer be trusted, and the smoke's verdicts.

Two things end a process that holds a GPU level, never a fallback or a refusal:
- a sticky error (the context poisoned: an illegal or misaligned address, a kernel that failed; CUDA's
  700, 716, 719, ..., found in the error or by a synchronize after it, cuDNN's execution failures
  included). Every later call of the process fails too, so a fallback after it would turn one fault
  into a row of refusals;
- a wait past its deadline with the kernel still running (hung): no memory may be freed under it,
  and no synchronize may be made that never returns.
The level writes one line on stderr (MARK, the kind, the reason) and the process exits with its
kind's code (EXIT); whoever started it (the study runner, verify, gpu-study's smoke) reads the line
(named) and records the variant as `fault` or `hung`, then starts a fresh process for the rest.

The smoke's verdicts: gpu-study's first step checks the newest variants, each dtype in a process of
its own, into a verify JSON file; later steps name it in QUARANTINE_ENV, and a level refuses (as
Unavailable, naming the smoke's verdict) a variant the smoke found hung or faulted.

    STICKY, CUDNN_FAULTS         the codes and names of the errors that poison a context
    sticky(exc) -> str | None    the sticky CUDA error an exception carries, named
    cudnn_failed(exc) -> str | None   cuDNN's execution failure an exception says (the context probed)
    end(kind, reason)            the line on stderr, then the process exits (EXIT[kind])
    probe(stream, where, exc)    after exc on a fallback path: sticky, or the stream's drain fails: end
    drain(stream, seconds, where)    the stream's work waited for, polled; still running: end (hung)
    named(text) -> (kind, reason) | None   the last such line in a log
    kind_of(exit_code) -> str | None       "fault" or "hung" for their exit codes
    quarantined(level, variant, dtype) -> str | None   the smoke's verdict on a variant, where bad
    refuse_quarantined(level, variant, dtype)          Unavailable with it
"""

import json
import os
import re
import sys
import time
from typing import Any

from harness.errors import Unavailable

# CUDA's sticky errors (cudaError_t and CUresult share the numbers; the runtime's, the driver's and
# the error string's words, as CuPy, the frameworks and cuDNN's messages quote them): the context
# must be destroyed
STICKY = {700: ("cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
                "an illegal memory access was encountered"),
          702: ("cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT",
                "the launch timed out and was terminated"),
          710: ("cudaErrorAssert", "CUDA_ERROR_ASSERT", "device-side assert triggered"),
          714: ("cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR", "hardware stack error"),
          715: ("cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                "an illegal instruction was encountered"),
          716: ("cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"),
          717: ("cudaErrorInvalidAddressSpace", "CUDA_ERROR_INVALID_ADDRESS_SPACE",
                "operation not supported on global/shared address space"),
          718: ("cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC", "invalid program counter"),
          719: ("cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"),
          214: ("cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE",
                "uncorrectable ECC error encountered")}
# cuDNN's own word for a kernel of its that failed (cuDNN 9's 5000-5004; cuDNN 8 said the first)
CUDNN_FAULTS = ("CUDNN_STATUS_EXECUTION_FAILED", "CUDNN_STATUS_EXECUTION_FAILED_CUDA_DRIVER",
                "CUDNN_STATUS_EXECUTION_FAILED_CUBLAS", "CUDNN_STATUS_EXECUTION_FAILED_CUDART",
                "CUDNN_STATUS_EXECUTION_FAILED_CURAND")
EXIT = {"fault": 86, "hung": 87}  # the process's exit code for each kind (any other: a crash)
MARK = "LENET-GPU-"  # the line's start: LENET-GPU-FAULT: reason, LENET-GPU-HUNG: reason
QUARANTINE_ENV = "LENET_GPU_QUARANTINE"  # the smoke's verify JSON, named by gpu-study for later steps
BAD = ("hung", "fault")  # the smoke's verdicts that keep a variant out of later steps
POLL_S = 0.0002  # a poll of the stream (cudaStreamQuery) every 0.2 ms: a close waits at most that longer
PROBE_WAIT_S = 5.0  # a probe's stream given this long to end (a call of LeNet takes far less)


def sticky(exc: BaseException | str) -> str | None:
    """The sticky CUDA error exc carries ("cudaErrorIllegalAddress (700)"), or None: by its `status`
    (CuPy's CUDARuntimeError, CUDADriverError) or its words (cuDNN's, the frontend's, a framework's or
    a driver's message; a str: a reply's reason)."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status in STICKY:
        return f"{STICKY[status][0]} ({status})"
    text = str(exc)
    for code, names in STICKY.items():
        if any(name in text for name in names) or re.search(rf"\b(error|status|code)\s*:?\s*{code}\b", text,
                                                           re.IGNORECASE):
            return f"{names[0]} ({code})"
    return None


def cudnn_failed(exc: BaseException | str) -> str | None:
    """cuDNN's own word for a kernel of its that failed (CUDNN_FAULTS), where exc says one, else None.
    It may or may not have poisoned the context (a launch refused for its resources does not): a level
    probes the context to know; a study's runner gives the group a fresh worker."""
    found = [name for name in CUDNN_FAULTS if name in str(exc)]
    return max(found, key=len) if found else None


def _exit(code: int) -> None:  # tests replace it: the process must end without unwinding
    os._exit(code)


def end(kind: str, reason: str) -> None:
    """The process ends: `MARK<KIND>: reason` on stderr, then exit code EXIT[kind], at once (no
    finally block, no close() that would free memory under a running kernel or wait forever)."""
    line = f"{MARK}{kind.upper()}: {' '.join(reason.split())}\n"
    try:
        sys.stderr.flush()
        os.write(2, line.encode("utf-8", "replace"))
    except (OSError, ValueError):
        pass
    _exit(EXIT[kind])


def probe(stream: Any, where: str, exc: BaseException, seconds: float = PROBE_WAIT_S) -> None:
    """After exc on a fallback path: where exc is a sticky CUDA error, or the context then reports one
    (the stream drained: polled, then synchronized; cuDNN's own execution failure is told so), the
    process ends as a fault named by the error (or as hung, the stream still running after
    `seconds`); else it returns: the fallback may go on."""
    name = sticky(exc)
    if name:
        end("fault", f"{name} in {where}: {type(exc).__name__}: {exc}")
    drain(stream, seconds, f"{where} (probed after {type(exc).__name__}: {exc})")


def drain(stream: Any, seconds: float, where: str) -> None:
    """The stream's work waited for, polling (stream.done) for at most `seconds`, never a blocking
    synchronize; then a synchronize, whose error (sticky) ends the process as a fault. Still running
    at the deadline: the process ends as hung. A stream without `done` (a test's) is taken as idle."""
    deadline = time.monotonic() + seconds
    try:
        while not getattr(stream, "done", True):
            if time.monotonic() > deadline:
                end("hung", f"{where}: its GPU work still running {seconds:g} s after it was asked to end")
                return  # (a test's end returns)
            time.sleep(POLL_S)
        stream.synchronize()
    except Exception as err:  # a query or synchronize that reports the kernel's error
        end("fault", f"{sticky(err) or type(err).__name__} in {where}: {err}")


def named(text: str) -> tuple[str, str] | None:
    """(kind, reason) of the last MARK line in a log, or None."""
    found = None
    for line in text.splitlines():
        if line.startswith(MARK):
            head, _, reason = line[len(MARK):].partition(": ")
            if head.lower() in EXIT:
                found = (head.lower(), reason.strip())
    return found


def kind_of(exit_code: int | None) -> str | None:
    """'fault' or 'hung' for their exit codes, else None."""
    return next((kind for kind, code in EXIT.items() if code == exit_code), None)


def verdicts(path: str | os.PathLike) -> dict[tuple[str, str, str], str]:
    """(level, variant, dtype) -> "<status>: <reason>" for each row of the smoke's verify JSON whose
    status is in BAD. No file (the smoke wrote no row yet) gives none; a file that cannot be read is
    said on stderr and gives none (the smoke's verdicts narrow a campaign; their loss must not stop it)."""
    try:
        with open(path) as f:
            rows = json.load(f)["rows"]
        return {(str(r["implementation"]), str(r["variant"]), str(r["dtype"])):
                f"{r['status']}: {r.get('reason') or ''}".strip()
                for r in rows if isinstance(r, dict) and r.get("status") in BAD}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"WARNING: {QUARANTINE_ENV}={path}: not the smoke's verify JSON ({type(exc).__name__}: "
              f"{exc}); no variant kept out", file=sys.stderr)
        return {}


def quarantined(level: str, variant: str, dtype: str) -> str | None:
    """The smoke's verdict on the variant where it hung or faulted (QUARANTINE_ENV names the file),
    else None."""
    path = os.environ.get(QUARANTINE_ENV)
    return verdicts(path).get((level, variant, dtype)) if path else None


def refuse_quarantined(level: str, variant: str, dtype: str) -> None:
    """Unavailable naming the smoke's verdict, where the variant hung or faulted there."""
    verdict = quarantined(level, variant, dtype)
    if verdict:
        raise Unavailable(f"not run: gpu-study's smoke step found {level}/{variant} {dtype} {verdict} "
                          f"({os.environ.get(QUARANTINE_ENV)})")
