"""A GPU's serialized cuDNN device properties, for deviceless ahead-of-time compilation (cuDNN >= 9.8,
the frontend's `create_device_properties`): recorded once on a GPU, then the frontend variant's
graphs are planned against it on a machine without one (frontend.build_deviceless).

    python -m lenet_cudnn.frontend_device record --out DIR   # on a GPU: DIR/cudnn-device-<host>-<id>.json
    python -m lenet_cudnn.frontend_device check FILE         # anywhere with libcudnn: plan every stage

The file (one JSON object): gpu (its name), compute_capability, cudnn (the library's version),
frontend (the wheel's), recorded (UTC), descriptor (the frontend's serialized string).
gpu-study's `cudnn-device` step records it into the archive; once imported into reports/results the
tests plan the graphs against it (tests/test_cudnn_frontend.py).
"""

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

from harness.errors import HarnessError, exit_code
from lenet_cudnn import binding as cu
from lenet_cudnn import frontend

FIELDS = ("gpu", "compute_capability", "cudnn", "frontend", "recorded", "descriptor")


def record(device: int = 0) -> dict:
    """This machine's GPU `device`: its name and its serialized properties."""
    from harness.frameworks import cupy_setup

    cp = cupy_setup.import_cupy()
    props = cp.cuda.runtime.getDeviceProperties(device)
    descriptor = frontend.record_device_properties(device)
    lib = cu.load()
    name = props["name"]
    return {"gpu": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props['major']}.{props['minor']}", "cudnn": lib.version,
            "frontend": frontend.import_frontend(lib).__version__,
            "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "descriptor": descriptor}


def read(path: Path) -> dict:
    """A recorded file, every field checked (HarnessError naming the file and field)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise HarnessError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{path}: expected a JSON object, found {type(data).__name__}")
    for name in FIELDS:
        if name not in data:
            raise HarnessError(f"{path}: field {name!r} missing (expected {', '.join(FIELDS)})")
    if not isinstance(data["descriptor"], str) or not data["descriptor"].strip():
        raise HarnessError(f"{path}: field 'descriptor': expected the serialized properties, "
                           f"found {data['descriptor']!r:.40}")
    return data


def write(data: dict, folder: Path) -> Path:
    """folder/cudnn-device-<host>-<time>.json, written whole (a temp file renamed)."""
    folder.mkdir(parents=True, exist_ok=True)
    stamp = data["recorded"].replace(":", "").replace("-", "")
    path = folder / f"cudnn-device-{socket.gethostname().split('.')[0]}-{stamp}.json"
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lenet_cudnn.frontend_device", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="this GPU's properties into --out")
    rec.add_argument("--out", type=Path, required=True)
    rec.add_argument("--device", type=int, default=0)
    chk = sub.add_parser("check", help="plan every stage against a recorded file (no GPU needed)")
    chk.add_argument("file", type=Path)
    chk.add_argument("--batch", type=int, default=1)
    chk.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = parser.parse_args(argv)
    try:
        if args.command == "record":
            print(write(record(args.device), args.out))
            return 0
        data = read(args.file)
        print(f"{data['gpu']} (sm {data['compute_capability']}, cuDNN {data['cudnn']}), "
              f"batch {args.batch}, {args.dtype}:")
        for stage, note in frontend.build_deviceless(data["descriptor"], args.batch, args.dtype).items():
            print(f"  {stage}: {note}")
        return 0
    except HarnessError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
