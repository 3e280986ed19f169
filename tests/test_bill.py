"""The full bill of a level (memory by stage, start-up, what must be installed), measured in its own
worker: the null level is the baseline, a level that allocates shows it at the right stage, the
installed distributions are read from the process, the GPU counters from the allocators."""

import sys
import types

import pandas as pd
import pytest

from harness.data import weights
from harness.measure.inside import memory, requires
from harness.measure.store import results
from harness.report.claims import bill
from tests.test_runner import lab_cell, only_run, run_cli, write_study

MB = 2**20


@pytest.fixture(scope="module")
def hungry_run(tmp_path_factory):
    """One small run of the null level and a level that touches 100 MB per call."""
    tmp = tmp_path_factory.mktemp("bill")
    study = write_study(tmp, calls=10, rounds=5, extra=lab_cell("HungryLeNet"))
    study.write_text(study.read_text().replace("warmup = 2\n", "warmup = 2\nbill = true\n"))
    done = run_cli(study, "--out", tmp / "out")
    assert done.returncode == 0, done.stderr
    rows = results.read_rows(only_run(tmp / "out"))
    return {r["cell_id"].split("/")[0]: r for r in rows if r["kind"] == "cell"}


def test_a_level_that_allocates_shows_it_at_the_peak_not_at_import(hungry_run):
    cell = hungry_run["tests.fake_impls:HungryLeNet"]
    stages = cell["setup"]["memory"]
    assert stages["peak_reset"] is True
    assert stages["import"] - stages["baseline"] < 20 * MB  # importing tests.fake_impls: no framework
    assert stages["model"] - stages["import"] < 20 * MB
    assert cell["rss_peak"] - stages["model"] >= 100e6  # the 100 MiB each call writes: at least 100 MB
    assert stages["first_calls_peak"] - stages["model"] >= 100e6


def test_the_null_level_is_the_baseline_and_its_install_is_shown_apart(hungry_run):
    null = hungry_run["null"]
    stages = null["setup"]["memory"]
    assert stages["import"] - stages["baseline"] < 5 * MB and null["rss_peak"] - stages["model"] < 10 * MB
    installed = null["setup"]["installed"]["distributions"]
    # no distribution of its own, no tools: what it loaded is its bill; nothing compiled at start-up
    assert null["setup"]["installed"]["required"] is None and null["setup"]["installed"]["system_tools"] is None
    assert null["setup"]["fresh_compile_cache"] is False
    assert installed["numpy"]["bytes"] > 5 * MB and installed["numpy"]["files"] > 100
    hungry = hungry_run["tests.fake_impls:HungryLeNet"]
    cell = pd.Series({**hungry, "implementation": "hungry", "device": "cpu", "label": "hungry/default",
                      "memory": hungry["setup"]["memory"], "installed": hungry["setup"]["installed"],
                      "cold_start_ms": hungry["setup"]["cold_start_ns"] / 1e6,
                      "import_s": hungry["setup"]["import_ns"] / 1e9, "load_s": hungry["setup"]["load_ns"] / 1e9,
                      "own_process": True})
    shared = bill.installed_mb(null["setup"]["installed"])
    found = bill.bill_of(cell, shared)
    assert found.shared_mb == pytest.approx(sum(shared.values())) and found.shared_mb > 5
    assert "numpy" not in dict(found.biggest)  # what every level needs is not this level's bill
    assert found.calls_peak_mb - found.baseline_mb >= 100
    assert found.startup_s == pytest.approx(found.import_s + found.build_s + found.first_call_s)


def test_what_was_installed_is_read_only_for_a_study_that_asks(tmp_path):
    """bill = true costs a second or so per worker: a study without it records memory, not installs."""
    done = run_cli(write_study(tmp_path, calls=10, rounds=5), "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    (cell,) = [r for r in results.read_rows(only_run(tmp_path / "out")) if r["kind"] == "cell"]
    assert cell["setup"]["installed"] is None and cell["setup"]["memory"]["baseline"] > 10 * MB


def test_a_level_importing_a_package_shows_that_distribution_with_its_size():
    import h5py  # noqa: F401  (a known distribution, imported here)

    found = memory.installed()
    assert found["distributions"]["h5py"]["bytes"] > MB
    assert found["distributions"]["h5py"]["version"] == sys.modules["h5py"].__version__
    maps = "7f00-7f01 r-xp 0 08:01 1 /nonexistent/libgone.so.1\n7f01-7f02 r-xp 0 08:01 2 [vdso]\n"
    assert memory.libraries(maps) == {}  # a library gone from disk, a pseudo-mapping: not counted


def test_gpu_memory_from_each_framework_allocator(monkeypatch):
    pool = types.SimpleNamespace(used_bytes=lambda: 5 * MB, total_bytes=lambda: 8 * MB)
    cupy = types.SimpleNamespace(get_default_memory_pool=lambda: pool)
    cuda = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 memory_allocated=lambda: 3 * MB, memory_reserved=lambda: 4 * MB,
                                 max_memory_allocated=lambda: 6 * MB)
    torch = types.SimpleNamespace(cuda=cuda)
    device = types.SimpleNamespace(platform="gpu", memory_stats=lambda: {"bytes_in_use": MB,
                                                                         "peak_bytes_in_use": 2 * MB})
    jax = types.SimpleNamespace(devices=lambda: [device])
    for name, module in (("cupy", cupy), ("torch", torch), ("jax", jax)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    found = memory.gpu(["cupy", "torch", "jax"])
    assert found["cupy"] == {"used": 5 * MB, "held": 8 * MB}
    assert found["torch"] == {"used": 3 * MB, "held": 4 * MB, "peak": 6 * MB}
    assert found["jax"] == {"used": MB, "peak": 2 * MB, "preallocate": "false"}
    assert memory.gpu(["tensorflow"]) == {}  # no GPU framework loaded: nothing read


def test_a_namespace_package_bills_only_the_distribution_whose_files_were_loaded(tmp_path, monkeypatch):
    """Two distributions share the namespace package `nsfake` (as nvidia-cudnn-cu12 and
    nvidia-cublas-cu12 share `nvidia`): a process that loaded a file of one is billed that one only."""
    site = tmp_path / "site"
    for part in ("a", "b"):
        package = site / "nsfake" / part
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("x = 1\n" * 1000)
        info = site / f"nsfake_{part}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: nsfake-{part}\nVersion: 1.0\n")
        (info / "RECORD").write_text(f"nsfake/{part}/__init__.py,,\nnsfake_{part}-1.0.dist-info/METADATA,,\n"
                                     f"nsfake_{part}-1.0.dist-info/RECORD,,\n")
    monkeypatch.syspath_prepend(str(site))
    found = memory.installed([str(site / "nsfake" / "a" / "__init__.py")], maps_text="")
    assert "nsfake-a" in found["distributions"] and "nsfake-b" not in found["distributions"]
    assert found["distributions"]["nsfake-a"]["loaded"] == 1


def test_an_install_size_says_what_its_count_counts():
    # issue 72: "15 MiB (7)" with nothing saying what 7 is; both tables' headers now say it
    b = bill.Bill("c", "cpu", "c/fused", 70, 1, 1, 80, 0.03, 0.01, 0.01, 0.01, 15.2, 7, (), 112)
    assert bill.installed_text(b) == "15 MiB (7)"
    assert bill.INSTALLED_HEADER.endswith("(how many distributions, shared libraries and tools' files)")


# --- what must be installed: the requirements' closure (issue 72) ---------------------------------

def test_the_closure_of_a_small_real_distribution_is_its_requires_dist():
    """h5py requires numpy, and numpy nothing: read from the metadata installed here."""
    found = requires.closure(["h5py", "lenet-no-such-distribution"], memory._distribution_size)
    assert found["of"] == ["h5py"] and found["missing"] == []  # a name not installed is passed over
    assert {requires.normal(n) for n in found["closure"]} == {"h5py", "numpy"}
    assert found["closure"]["h5py"]["bytes"] == memory._distribution_size("h5py")[1] > MB
    # what the harness's weights reader needs joins a level's closure, never its own distributions
    found = requires.closure(["numpy"], memory._distribution_size, also=weights.DISTRIBUTIONS)
    assert found["of"] == ["numpy"] and "h5py" in found["closure"]
    assert memory.installed([], "", own=["lenet-no-such-distribution"], also=["h5py"])["required"] is None


def write_dist(site, name, requires_dist=()):
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    extras = sorted({r.split("extra == '")[1].rstrip("'") for r in requires_dist if "extra ==" in r})
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"
                                   + "".join(f"Provides-Extra: {e}\n" for e in extras)
                                   + "".join(f"Requires-Dist: {r}\n" for r in requires_dist))
    (info / "RECORD").write_text(f"{info.name}/METADATA,,\n{info.name}/RECORD,,\n")


def test_the_closure_evaluates_markers_asks_no_extras_and_names_what_is_missing(tmp_path, monkeypatch):
    site = tmp_path / "site"
    write_dist(site, "billfake-top", ["billfake-dep>=1", "billfake-gpu; extra == 'gpu'",
                                      "billfake-old; python_version < '3'", "billfake-gone",
                                      "Billfake_Loop"])
    write_dist(site, "billfake-dep", ["billfake-top"])  # a cycle: read once
    write_dist(site, "billfake-loop")
    write_dist(site, "billfake-gpu")  # installed, but only an extra asks for it
    monkeypatch.syspath_prepend(str(site))
    found = requires.closure(["billfake-top"], lambda name: ("1.0", 10, 1))
    assert found["of"] == ["billfake-top"]
    assert sorted(found["closure"]) == ["billfake-dep", "billfake-loop", "billfake-top"]
    assert found["missing"] == ["billfake-gone"]
    assert found["through_extras"] == ["billfake-gpu"]  # what `pip install billfake-top[gpu]` adds


def test_an_extra_a_requirement_names_is_followed_as_pip_would(tmp_path, monkeypatch):
    """jax[cuda13] -> jax-cuda13-plugin[with-cuda] -> its CUDA libraries: an extra named in a
    Requires-Dist is asked of that distribution; its other extras are not."""
    site = tmp_path / "site"
    write_dist(site, "xfake-top", ["xfake-plugin[with-cuda]", "xfake-cli; extra == 'cli'"])
    write_dist(site, "xfake-plugin", ["xfake-libs; extra == 'with-cuda'", "xfake-test; extra == 'test'"])
    for name in ("xfake-libs", "xfake-test", "xfake-cli"):
        write_dist(site, name)
    monkeypatch.syspath_prepend(str(site))
    found = requires.closure(["xfake-top"], lambda name: ("1.0", 10, 1))
    assert sorted(found["closure"]) == ["xfake-libs", "xfake-plugin", "xfake-top"]
    assert found["through_extras"] == ["xfake-cli"]  # the top's own extras only, not the plugin's test


def installed_record(required="absent", tools=None):
    """A worker's `installed` as the runner records it: TensorFlow imported JAX because it was there."""
    record = {"distributions": {"tensorflow_cpu": {"bytes": 1000 * MB}, "jaxlib": {"bytes": 300 * MB},
                                "numpy": {"bytes": 60 * MB}, "h5py": {"bytes": 15 * MB},
                                "pillow": {"bytes": MB // 2}},
              "system_libraries": {"/usr/lib/libgomp.so.1": MB, "/usr/lib/libc.so.6": 2 * MB},
              "system_tools": tools}
    if required != "absent":
        record["required"] = required
    return record


CLOSURE = {"of": ["tensorflow_cpu"], "missing": [],
           "closure": {"tensorflow-cpu": {"bytes": 1000 * MB}, "numpy": {"bytes": 60 * MB},
                       "h5py": {"bytes": 15 * MB}, "grpcio": {"bytes": 10 * MB}}}
SHARED = {"numpy": 60.0, "/usr/lib/libc.so.6": 2.0}  # the null level's installed_mb


def test_the_install_size_counts_what_is_required_and_shows_the_imported_rest_apart():
    found = bill.install_of(installed_record(CLOSURE), SHARED)
    assert found.basis == "required"
    # grpcio is required though never imported; numpy and libc are the harness's own
    assert found.counted == {"tensorflow-cpu": 1000, "h5py": 15, "grpcio": 10, "/usr/lib/libgomp.so.1": 1}
    assert found.not_required == {"jaxlib": 300, "pillow": 0.5}  # tensorflow_cpu is tensorflow-cpu


def test_on_the_gpu_what_the_worker_loaded_of_the_levels_extras_counts():
    """JAX on the GPU is installed as jax[cuda13]: its plugin, loaded, is required there, not on the CPU."""
    record = installed_record({**CLOSURE, "through_extras": ["jaxlib"]})
    assert "jaxlib" in bill.install_of(record, SHARED, "cpu").not_required
    on_gpu = bill.install_of(record, SHARED, "gpu")
    assert on_gpu.counted["jaxlib"] == 300 and on_gpu.not_required == {"pillow": 0.5}


def test_an_older_row_keeps_everything_it_imported_and_says_so():
    found = bill.install_of(installed_record(), SHARED)
    assert found.basis == "older" and found.not_required == {}
    assert found.counted == {"tensorflow_cpu": 1000, "jaxlib": 300, "h5py": 15, "pillow": 0.5,
                             "/usr/lib/libgomp.so.1": 1}
    b = bill.Bill("tf", "cpu", "tf/function", 70, 600, 2, 700, 3.5, 3.3, 0.01, 0.2, 1316.5, 5, (), 62,
                  basis=found.basis)
    assert bill.installed_text(b) == f"1,316 MiB (5), {bill.OLDER}"
    assert bill.not_required_text(b) == "not recorded (an older run)"


def test_a_level_without_distributions_counts_what_it_loaded_and_its_compiler():
    tools = {"compiler": "cc (Debian 12.2.0) 12.2.0",
             "files": {"/usr/lib/gcc/x86_64-linux-gnu/12/cc1": 32 * MB, "/usr/lib/libc.so.6": 2 * MB}}
    found = bill.install_of(installed_record(None, tools), SHARED)
    assert found.basis == "loaded" and found.tools == {"/usr/lib/gcc/x86_64-linux-gnu/12/cc1": 32}
    assert found.counted["/usr/lib/gcc/x86_64-linux-gnu/12/cc1"] == 32 and "/usr/lib/libc.so.6" not in found.counted
    broken = bill.install_of(installed_record(None, {"error": "FileNotFoundError: ldd"}), SHARED)
    assert broken.compiler == "not read: FileNotFoundError: ldd" and broken.tools == {}


def cell_of(installed, fresh=None):
    return pd.Series({"implementation": "c", "device": "cpu", "label": "c/fused", "installed": installed,
                      "memory": {"baseline": 70 * MB, "import": 80 * MB, "model": 81 * MB},
                      "rss_peak": 90 * MB, "cold_start_ms": 0.1, "import_s": 0.03, "load_s": 0.45,
                      "own_process": True, "fresh_compile_cache": fresh})


def test_the_bill_of_a_compiling_level_shows_its_compile_and_its_tools():
    tools = {"compiler": "cc 12.2.0", "files": {"/usr/lib/gcc/cc1": 32 * MB, "/usr/bin/as": MB}}
    b = bill.bill_of(cell_of(installed_record(None, tools), fresh=True), SHARED)
    assert bill.startup_text(b) == "0.48 s (compiles)"
    assert b.tools_mb == 33 and b.tools_count == 2 and bill.tools_text(b) == "cc 12.2.0: 33 MiB (2 files)"
    assert b.install_mb == pytest.approx(1000 + 300 + 15 + 0.5 + 1 + 33) and b.install_count == 7
    older = bill.bill_of(cell_of(installed_record(None, None), fresh=float("nan")), SHARED)
    assert bill.startup_text(older) == "0.48 s" and bill.tools_text(older) == "–"  # NaN: an older row


def test_what_was_imported_but_not_required_is_named_with_its_size():
    b = bill.bill_of(cell_of(installed_record(CLOSURE)), SHARED)
    assert b.install_mb == pytest.approx(1026) and b.install_count == 4
    assert bill.not_required_text(b) == "jaxlib 300 MiB and 1 more (0.5 MiB)"
    assert bill.not_required_text(b, at_least_mb=1000) == "2 small ones (300.5 MiB)"
    b = bill.bill_of(cell_of(installed_record(CLOSURE | {"closure": {**CLOSURE["closure"],
                                                                     "jaxlib": {"bytes": 300 * MB},
                                                                     "pillow": {"bytes": MB}}})), SHARED)
    assert bill.not_required_text(b) == "–"
