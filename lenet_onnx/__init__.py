"""The inference-engine level: the shared Keras model exported to ONNX once (export.py), run by
ONNX Runtime and OpenVINO (model.py)."""
