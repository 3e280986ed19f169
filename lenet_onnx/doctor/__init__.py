"""What `harness doctor` asks the inference-engine level (not part of the level's inference code, so
not in its line count)."""
