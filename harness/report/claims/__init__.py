"""What reads the rows and computes a claim: the runs loaded, the headline's rows, the bill, the
code, the machines, how far two machines of one type differ.

    rundata    result files -> runs and their cells' frame, each cell pooled over the runs of the same
               code on its machine; the machines and runs that answer; find, ratio_ci
    hosts      which machine a run was measured on (its fingerprint), and its name in the report
    pairs      two machines of one CPU type: how far their cells and ratios differ
    headline   the answer: one row per level (code lines, CPU and GPU latency, throughput, ratios)
    bill       the rest of a level's bill: memory by stage, start-up, what must be installed
    loc        lines of code per level package (pygount), the shared loaders apart
    reproduce  DETAILS' section on the reproduce rows (harness.reproduce): the shares of cells
               reproduced, how far a second run moved the medians and ratios
    validity   the cells whose speed depends on the process, how each study's time was spent, the
               noisy cells, repeatability across runs, the timer's cross-check

May import: harness.report.markup and the harness's wings below the report (tests/test_layout.py).
"""
