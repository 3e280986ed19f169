"""A GPU process's end on a sticky error or a hang (harness.frameworks.gpu_fault), without a GPU: the
errors that poison a context told from refusals, the line and exit code a parent reads, the probe
after a fallback's exception, a drain that never ends, and the smoke's verdicts keeping a variant out."""

import json
import subprocess
import sys
import types

import pytest

from harness.errors import Unavailable
from harness.frameworks import gpu_fault


class Ended(BaseException):
    """What gpu_fault.end does in a test instead of ending the process: kind and reason."""

    def __init__(self, kind, reason):
        super().__init__(f"{kind}: {reason}")
        self.kind, self.reason = kind, reason


@pytest.fixture
def ended(monkeypatch, capfd):
    """gpu_fault's exit replaced: the process goes on, Ended raised with the line it wrote."""

    def fake_exit(code):
        err = capfd.readouterr().err
        found = gpu_fault.named(err)
        assert found is not None and gpu_fault.kind_of(code) == found[0], err
        raise Ended(*found)

    monkeypatch.setattr(gpu_fault, "_exit", fake_exit)


class CudaError(RuntimeError):
    """CuPy's CUDARuntimeError: a status and cudaGetErrorName's words."""

    def __init__(self, status, name):
        super().__init__(f"{name}: whatever the runtime says")
        self.status = status


class Stream:
    """A stream whose work ends after `busy` polls (None: never), then whose queries raise `error`."""

    def __init__(self, busy=0, error=None):
        self.busy, self.error, self.synchronized = busy, error, 0

    @property
    def done(self):
        if self.busy is None or self.busy > 0:
            self.busy = None if self.busy is None else self.busy - 1
            return False
        if self.error:
            raise self.error
        return True

    def synchronize(self):
        if self.busy is None:
            raise AssertionError("a synchronize that never returns")
        self.synchronized += 1
        if self.error:
            raise self.error


def test_sticky_errors_are_told_from_refusals():
    assert gpu_fault.sticky(CudaError(700, "cudaErrorIllegalAddress")) == "cudaErrorIllegalAddress (700)"
    assert gpu_fault.sticky(RuntimeError("CUDA_ERROR_MISALIGNED_ADDRESS")) == "cudaErrorMisalignedAddress (716)"
    assert gpu_fault.sticky("RuntimeError: CUDA error: an illegal memory access was encountered") == \
        "cudaErrorIllegalAddress (700)"  # a framework's words, as a worker's reply quotes them
    cudnn = RuntimeError("cudnnConvolutionForward failed: CUDNN_STATUS_EXECUTION_FAILED_CUDART (status 5003)")
    assert gpu_fault.sticky(cudnn) is None and gpu_fault.cudnn_failed(cudnn) == "CUDNN_STATUS_EXECUTION_FAILED_CUDART"
    assert gpu_fault.sticky(RuntimeError("launch failed: error 719")) == "cudaErrorLaunchFailure (719)"
    for refusal in ("CUDNN_STATUS_NOT_SUPPORTED: no engine", "CUDNN_STATUS_BAD_PARAM: misaligned pointer?",
                    "cudaErrorStreamCaptureUnsupported", "cublasLtMatmul failed (status 15)"):
        assert gpu_fault.sticky(RuntimeError(refusal)) is None, refusal


def test_end_writes_one_line_and_exits_with_its_kinds_code():
    """In a real process: nothing after end runs, no finally block either."""
    code = ("import sys\nfrom harness.frameworks import gpu_fault\ntry:\n"
            "    gpu_fault.end('fault', 'cudaErrorIllegalAddress (700) in\\n conv1')\n"
            "finally:\n    print('a finally block ran')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == gpu_fault.EXIT["fault"] == 86 and done.stdout == ""
    assert done.stderr.splitlines()[-1] == "LENET-GPU-FAULT: cudaErrorIllegalAddress (700) in conv1"
    assert gpu_fault.named(done.stderr) == ("fault", "cudaErrorIllegalAddress (700) in conv1")
    assert gpu_fault.kind_of(87) == "hung" and gpu_fault.kind_of(1) is None and gpu_fault.kind_of(None) is None


def test_a_probe_after_a_refusal_lets_the_fallback_go_on(ended):
    stream = Stream(busy=2)
    gpu_fault.probe(stream, "conv1's fused graph", RuntimeError("CUDNN_STATUS_NOT_SUPPORTED"))
    assert stream.synchronized == 1
    # cuDNN's execution failure with the context clean (a launch refused for its resources): a refusal
    gpu_fault.probe(stream, "plan 2 of 3", RuntimeError("CUDNN_STATUS_EXECUTION_FAILED_CUDART"))
    assert stream.synchronized == 2


def test_a_sticky_error_raised_mid_call_ends_the_process_as_a_fault_never_a_fallback(ended):
    with pytest.raises(Ended) as got:
        gpu_fault.probe(Stream(), "plan 1 of 3", CudaError(716, "cudaErrorMisalignedAddress"))
    assert got.value.kind == "fault" and got.value.reason.startswith("cudaErrorMisalignedAddress (716) in plan 1")
    # a refusal's words, but the context says otherwise: the probe's synchronize names the fault
    poisoned = Stream(error=CudaError(700, "cudaErrorIllegalAddress"))
    with pytest.raises(Ended) as got:
        gpu_fault.probe(poisoned, "fc1's matmul", RuntimeError("CUDNN_STATUS_BAD_PARAM"))
    assert got.value.kind == "fault" and got.value.reason.startswith("cudaErrorIllegalAddress (700) in fc1's")


def test_a_kernel_that_never_finishes_ends_the_process_as_hung_without_a_synchronize(ended, monkeypatch):
    with pytest.raises(Ended) as got:
        gpu_fault.drain(Stream(busy=None), 0.05, "cuda/resident_rows (float64)'s close")
    assert got.value.kind == "hung" and "still running 0.05 s" in got.value.reason
    stream = Stream(busy=3)
    gpu_fault.drain(stream, 5.0, "a close")  # ends in time: synchronized, nothing said
    assert stream.synchronized == 1
    gpu_fault.drain(types.SimpleNamespace(synchronize=lambda: None), 0.0, "a test's stream")  # no `done`


def test_the_smokes_verdicts_keep_a_hung_or_faulted_variant_out(tmp_path, monkeypatch, capsys):
    smoke = tmp_path / "verify-smoke.json"
    rows = [{"implementation": "cuda", "variant": "resident_rows", "dtype": "float64", "status": "hung",
             "reason": "LENET-less words"},
            {"implementation": "cuda", "variant": "rows", "dtype": "float64", "status": "ok"},
            {"implementation": "cudnn", "variant": "frontend", "dtype": "float32", "status": "fault",
             "reason": "cudaErrorIllegalAddress (700) in conv1"},
            {"implementation": "cuda", "variant": "overlap", "dtype": "float32", "status": "FAIL", "reason": "wrong"}]
    smoke.write_text(json.dumps({"rows": rows}))
    assert gpu_fault.quarantined("cuda", "resident_rows", "float64") is None  # no file named: nothing kept out
    monkeypatch.setenv(gpu_fault.QUARANTINE_ENV, str(smoke))
    assert gpu_fault.quarantined("cuda", "resident_rows", "float64") == "hung: LENET-less words"
    assert gpu_fault.quarantined("cuda", "resident_rows", "float32") is None
    assert gpu_fault.quarantined("cuda", "overlap", "float32") is None  # wrong answers are verify's to say
    with pytest.raises(Unavailable, match=r"not run: gpu-study's smoke step found cudnn/frontend float32 fault: "
                                          r"cudaErrorIllegalAddress \(700\) in conv1"):
        gpu_fault.refuse_quarantined("cudnn", "frontend", "float32")
    gpu_fault.refuse_quarantined("cuda", "rows", "float64")
    smoke.write_text("{not json")
    assert gpu_fault.quarantined("cuda", "resident_rows", "float64") is None
    assert "not the smoke's verify JSON" in capsys.readouterr().err
    smoke.unlink()  # the smoke has written no row yet: nothing kept out, nothing said
    assert gpu_fault.quarantined("cuda", "resident_rows", "float64") is None and capsys.readouterr().err == ""


def test_a_quarantined_variant_is_refused_before_the_gpu_is_looked_for(tmp_path, monkeypatch):
    """The levels ask first: no CuPy, no libcudnn needed to say a variant is kept out."""
    from harness import DEFAULT_WEIGHTS, registry

    smoke = tmp_path / "smoke.json"
    smoke.write_text(json.dumps({"rows": [
        {"implementation": level, "variant": variant, "dtype": "float32", "status": "hung", "reason": "stuck"}
        for level, variant in (("cuda", "resident_rows"), ("cudnn", "frontend"))]}))
    monkeypatch.setenv(gpu_fault.QUARANTINE_ENV, str(smoke))
    for level, variant in (("cuda", "resident_rows"), ("cudnn", "frontend")):
        with pytest.raises(Unavailable, match=f"smoke step found {level}/{variant} float32 hung: stuck"):
            registry.create(level, DEFAULT_WEIGHTS, device="gpu", variant=variant, dtype="float32")
