"""The level's `doctor` hook (registry.py): the engines installed here, each one's version and what it
can run on (ONNX Runtime's execution providers, OpenVINO's devices), and the exporter's packages.
doctor asks it in a fresh interpreter and prints its line after the level's short name."""

from importlib import metadata


def probe() -> dict:
    """{"line": "onnxruntime 1.22.0 (providers: ...); openvino ... (devices: ...); onnx ...; tf2onnx ..."}:
    a missing engine or exporter package is named with the command that installs it."""
    found = {}
    try:
        import onnxruntime as ort

        found["onnxruntime"] = f"{ort.__version__} (providers: {', '.join(ort.get_available_providers())})"
    except ImportError as exc:
        found["onnxruntime"] = f"missing ({exc}): pip install onnxruntime"
    try:
        import openvino as ov

        found["openvino"] = f"{ov.get_version()} (devices: {', '.join(ov.Core().available_devices)})"
    except ImportError as exc:
        found["openvino"] = f"missing ({exc}): pip install openvino"
    for name in ("onnx", "tf2onnx"):  # the exporter's (Keras' ONNX export on TensorFlow calls tf2onnx)
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = f"missing: pip install {name}"
    return {"line": "; ".join(f"{name} {what}" for name, what in found.items())}
