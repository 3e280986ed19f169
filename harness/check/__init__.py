"""Correctness and trust: verify every level against the NumPy oracle; the timer against timeit."""
