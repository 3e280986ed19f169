"""Many commands as one on a borrowed machine: the GPU study, its archive, what it may carry."""
