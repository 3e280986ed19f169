"""The machine a run happens on: environment metadata, process settings, GPUs, the GPU lock, doctor."""
