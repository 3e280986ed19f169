"""Many commands as one, on a borrowed machine: the GPU study, its manifest, its archive."""
