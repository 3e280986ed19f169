"""What a run leaves, and how it is read back: the run folders, their rows, and the statistics of raw
times.

    results    the results store: <out>/<study>/<run-id>/ with results.jsonl, env.json and study.toml
    rows       the one reader of result rows, a run's in either form (read_run), and of a run's
               env.json: nothing read is trusted
    rowfile    a run's rows on disk: plain while written, compressed (results.jsonl.gz) once complete;
               their names, and the compressing
    runfolder  a run folder's state: complete or not (its marker), its place in this checkout's
               order, and its one writer (a lock)
    stats      statistics of raw per-call times: medians, intervals from resampled rounds and processes
    upgrade    `upgrade-results`: complete runs' cell rows given the summary of the current version

May import: the harness's wings below measure; no other room of measure (tests/test_layout.py).
"""
