"""Per-framework set-up inside a worker, before or at import: threads, devices, no TF32."""
