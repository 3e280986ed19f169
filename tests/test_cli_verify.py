"""`python -m harness verify` exit codes and messages, run as a user runs it."""

import json
import subprocess
import sys

import numpy as np

from tests.conftest import ROOT, random_weights, write_keras3_file


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_agreeing_implementation_passes_with_json():
    run = harness("verify", "--implementations", "numpy", "--limit", "300", "--json")
    assert run.returncode == 0, run.stderr
    rows = json.loads(run.stdout)["rows"]
    assert rows[0]["agree"] == 300 and rows[0]["max_abs_diff"] == 0.0


def test_wrong_answers_exit_1():
    run = harness("verify", "--implementations", "numpy,tests.fake_impls:WrongLeNet", "--limit", "200")
    assert run.returncode == 1
    assert "FAIL" in run.stderr and "DISAGREEMENT" in run.stderr


def test_probabilities_beyond_tolerance_exit_1_even_with_equal_argmax():
    run = harness("verify", "--implementations", "tests.fake_impls:SlightlyOffLeNet",
                  "--limit", "200", "--json")
    assert run.returncode == 1
    row = json.loads(run.stdout)["rows"][0]
    assert row["agree"] == 200 and row["max_abs_diff"] > 1e-5 and row["status"] == "FAIL"


def test_unusable_weights_give_one_line_error(tmp_path):
    layers = random_weights()
    bad = layers["fc1"].kernel.copy()
    bad[0, 0] = np.inf
    path = write_keras3_file(tmp_path / "inf.h5", layers, {"fc1/kernel": bad})
    run = harness("verify", "--implementations", "numpy", "--weights", str(path))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"ERROR: {path}: fc1/kernel: 1 non-finite value(s) (NaN or Inf); expected finite weights"]


def test_unknown_implementation_lists_known_names():
    run = harness("verify", "--implementations", "numpy,pytorch")
    assert run.returncode == 2
    assert "unknown implementation 'pytorch'" in run.stderr and "keras" in run.stderr
    assert "Traceback" not in run.stderr


def test_json_file_goes_into_a_new_folder(tmp_path):
    target = tmp_path / "new" / "folder" / "verify.json"
    run = harness("verify", "--implementations", "numpy", "--limit", "50", "--json", str(target))
    assert run.returncode == 0, run.stderr
    assert json.loads(target.read_text())["rows"][0]["agree"] == 50


def test_crosscheck_against_timeit_writes_its_result(tmp_path):
    """The command runs and records both timers per round; the agreement itself is reported
    (REPORT.md), not asserted: it depends on the machine."""
    target = tmp_path / "crosscheck.json"
    run = harness("crosscheck", "--calls", "20", "--rounds", "3", "--json", str(target))
    assert run.returncode == 0, run.stderr
    result = json.loads(target.read_text())
    assert result["implementation"] == "numpy" and len(result["per_round"]) == 3
    for r in result["per_round"]:
        assert r["harness_mean_ns"] > 0 and r["timeit_mean_ns"] > 0
        assert r["ratio"] == r["harness_mean_ns"] / r["timeit_mean_ns"]
    low, high = result["ratio_ci95"]
    assert low <= result["ratio_median"] <= high
    assert "harness / timeit, mean per call:" in run.stdout


def test_a_verify_stopped_half_way_keeps_the_rows_it_checked(tmp_path):
    """gpu-study stops a verify that outruns its time (SIGTERM): the rows so far are in the file."""
    target = tmp_path / "verify.json"
    child = subprocess.Popen([sys.executable, "-m", "harness", "verify", "--implementations",
                              "numpy,tests.fake_impls:HangingLeNet", "--limit", "50", "--json", str(target)],
                             cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for line in child.stdout:  # numpy's row is printed after it is saved
            if line.startswith("numpy/"):
                break
        saved = json.loads(target.read_text())
    finally:
        child.terminate()
        child.wait(timeout=60)
    assert [r["implementation"] for r in saved["rows"]] == ["numpy"]
    assert saved["rows"][0]["agree"] == 50 and saved["complete"] is False and saved["exit_code"] is None


def test_levels_on_one_framework_share_a_child_and_other_environments_do_not(monkeypatch):
    """verify and verify-train start one child per family: an ops level and Keras on its framework
    import it once; a level on the same framework with another environment, or a second Keras
    level, runs alone."""
    import dataclasses

    from harness import registry
    from harness.check.verify import families

    names = ["numpy", "tf", "jax", "torch", "keras", "keras_jax", "keras_torch", "c", "numpy"]
    assert families(names) == [["numpy"], ["tf", "keras"], ["jax", "keras_jax"], ["torch", "keras_torch"],
                               ["c"], ["numpy"]]
    other = dataclasses.replace(registry.REGISTRY["jax"], name="jax_other", env=(("XLA_FLAGS", "--other"),))
    monkeypatch.setitem(registry.REGISTRY, "jax_other", other)
    assert families(["jax", "jax_other", "keras_jax"]) == [["jax", "keras_jax"], ["jax_other"]]
    on_jax = dataclasses.replace(registry.REGISTRY["keras_jax"], name="keras_jax_too")
    monkeypatch.setitem(registry.REGISTRY, "keras_jax_too", on_jax)
    assert families(["jax", "keras_jax", "keras_jax_too"]) == [["jax", "keras_jax"], ["keras_jax_too"]]


def test_a_shared_child_that_dies_fails_only_the_rows_it_did_not_report(tmp_path):
    from harness.check.verify import rows_of_child

    reported = {"implementation": "tf", "dtype": "float32", "variant": "eager", "status": "ok"}
    command = [sys.executable, "-c", f"import json, os; print(json.dumps({reported!r}), flush=True); os._exit(9)"]
    expected = [{"implementation": name, "dtype": "float32", "variant": "eager"} for name in ("tf", "keras")]
    rows = list(rows_of_child(command, ["tf", "keras"], expected, str(tmp_path / "log"), "verify"))
    assert rows[0] == reported
    assert rows[1] == {**expected[1], "status": "FAIL",
                       "reason": "the verify process for tf,keras ended with exit code 9"}
    assert len(rows) == 2


def test_a_fault_ends_its_child_and_a_fresh_one_checks_the_variants_after_it(tmp_path):
    """A variant whose process ends on a sticky error (gpu_fault) is a `fault` row named by the error;
    the level's next variant is checked in a fresh child; exit 1."""
    target = tmp_path / "verify.json"
    run = harness("verify", "--implementations", "tests.fake_impls:FaultingLeNet", "--limit", "50",
                  "--json", str(target))
    assert run.returncode == 1, run.stderr
    rows = {r["variant"]: r for r in json.loads(target.read_text())["rows"]}
    assert rows["bad"]["status"] == "fault"
    assert rows["bad"]["reason"] == ("cudaErrorIllegalAddress (700) in a test's kernel (the verify process for "
                                     "tests.fake_impls:FaultingLeNet ended with exit code 86)")
    assert rows["good"]["status"] == "ok" and rows["good"]["agree"] == 50
    assert "Traceback" not in run.stderr


def test_a_child_past_its_limit_is_killed_and_its_variant_is_hung(tmp_path):
    target = tmp_path / "verify.json"
    run = harness("verify", "--implementations", "numpy,tests.fake_impls:HangingLeNet", "--limit", "50",
                  "--child-timeout-s", "3", "--json", str(target))
    assert run.returncode == 1, run.stderr
    rows = json.loads(target.read_text())["rows"]
    assert [(r["implementation"], r["status"]) for r in rows] == [("numpy", "ok"),
                                                                  ("tests.fake_impls:HangingLeNet", "hung")]
    assert rows[1]["reason"] == ("the verify process for tests.fake_impls:HangingLeNet did not finish within 3 s: "
                                 "killed while this ran")


def test_a_verify_train_child_past_its_limit_is_killed_and_its_variant_is_hung(tmp_path):
    """verify-train's children have verify's limit: one that never answers is killed at it, its
    variant `hung`, exit 1."""
    target = tmp_path / "verify-train.json"
    run = harness("verify-train", "--implementations", "tests.fake_impls:HangingTrainerLeNet", "--steps", "1",
                  "--child-timeout-s", "3", "--json", str(target))
    assert run.returncode == 1, run.stderr
    rows = json.loads(target.read_text())["rows"]
    assert [(r["implementation"], r["variant"], r["status"]) for r in rows] == [
        ("tests.fake_impls:HangingTrainerLeNet", "default", "hung")]
    assert rows[0]["reason"] == ("the verify-train process for tests.fake_impls:HangingTrainerLeNet did not "
                                 "finish within 3 s: killed while this ran")


def test_on_the_gpu_each_child_checks_one_level_in_one_dtype():
    from harness.check.verify import children

    assert children(["cuda", "cudnn/frontend"], ["float32", "float64"], "gpu") == [
        (["cuda"], ["float32"]), (["cuda"], ["float64"]), (["cudnn/frontend"], ["float32"]),
        (["cudnn/frontend"], ["float64"])]
    assert children(["tf", "keras", "numpy"], ["float32", "float64"], "cpu") == [
        (["tf", "keras"], ["float32", "float64"]), (["numpy"], ["float32", "float64"])]


def test_a_child_that_names_a_hang_or_fault_leaves_the_rest_to_a_fresh_one(tmp_path):
    from harness.check.verify import rows_of_child

    reported = {"implementation": "cuda", "dtype": "float64", "variant": "rows", "status": "ok"}
    code = (f"import json, os, sys; print(json.dumps({reported!r}), flush=True); "
            "sys.stderr.write('chatter\\nLENET-GPU-HUNG: cuda/resident_rows (float64): still running\\n'); "
            "sys.stderr.flush(); os._exit(87)")
    expected = [{"implementation": "cuda", "dtype": "float64", "variant": v} for v in ("rows", "resident_rows", "batch")]
    rest = []
    rows = list(rows_of_child([sys.executable, "-c", code], ["cuda"], expected, str(tmp_path / "log"), "verify",
                              60, rest))
    assert rows == [reported, {**expected[1], "status": "hung", "reason": "cuda/resident_rows (float64): still "
                               "running (the verify process for cuda ended with exit code 87)"}]
    assert rest == [expected[2]]


def test_a_level_slash_variant_names_one_variant_and_an_unknown_one_is_one_error_line():
    run = harness("verify", "--implementations", "cuda/nope", "--device", "gpu")
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith("ERROR: --implementations: cuda has no variant 'nope' on gpu; it runs fused,")
    from harness.check.child import level_of, variants_of

    assert level_of("cuda/rows") == "cuda" and variants_of("cuda/rows", "gpu") == ["rows"]
    assert level_of("tests.fake_impls:FaultingLeNet/good") == "tests.fake_impls:FaultingLeNet"
    assert variants_of("tests.fake_impls:FaultingLeNet", "cpu") == ["bad", "good"]
