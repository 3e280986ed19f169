"""What reads the rows and computes a claim: the runs loaded, the headline's rows, the bill, the code.

    rundata    result files -> runs and their cells' frame; the run that answers; find, ratio_ci
    headline   the answer: one row per level (code lines, CPU and GPU latency, throughput, ratios)
    bill       the rest of a level's bill: memory by stage, start-up, what must be installed
    loc        lines of code per level package (pygount), the shared loaders apart
    reproduce  a second run of a study held against its first: the share of cells it reproduces

May import: harness.report.markup and the harness's wings below the report (tests/test_layout.py).
"""
