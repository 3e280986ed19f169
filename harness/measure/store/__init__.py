"""What a run leaves, and how it is read back: the run folders' rows, and the statistics of raw times.

    results   the results store: <out>/<study>/<run-id>/ with results.jsonl, env.json and study.toml
    stats     statistics of raw per-call times: medians, intervals from resampled rounds and processes

May import: the harness's wings below measure; no other room of measure (tests/test_layout.py).
"""
