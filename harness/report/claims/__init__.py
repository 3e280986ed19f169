"""What reads the rows and computes a claim: the runs loaded, the headline's rows, the bill, the
code, the machines, the drift between runs.

    rundata    result files -> runs and their cells' frame; the run that answers; find, ratio_ci
    hosts      which machine a run was measured on (its fingerprint), and its name in the report
    headline   the answer: one row per level (code lines, CPU and GPU latency, throughput, ratios)
    drift      how far a machine's medians move between two runs (reproduce rows): an interval for
               a rerun, and a number quoted with it
    bill       the rest of a level's bill: memory by stage, start-up, what must be installed
    loc        lines of code per level package (pygount), the shared loaders apart
    reproduce  DETAILS' section on the reproduce rows (harness.reproduce): the shares of cells reproduced
    validity   the cells whose speed depends on the process, how each study's time was spent, the
               noisy cells, repeatability across runs, the timer's cross-check

May import: harness.report.markup and the harness's wings below the report (tests/test_layout.py).
"""
