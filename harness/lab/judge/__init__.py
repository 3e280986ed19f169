"""The judge: a lab file, and a class's grading under it.

    assignment  the lab file (labs/NAME.toml): what is graded, beside which references, the limits
    tables      its [measure], [gate], [limits] and [grade] tables, each a record and its checks
    grade       grade_all (every submission of a class, row by row: resume, only, retries) and the
                Grader (one submission's row, start to finish)
    prepare, references, steps, verdict   the Grader's phases, one class on the last: the oracle,
                images and spaces; the references' workers and the deadlines' pace; one submission's
                steps; its clocks checked and its times ranked
    timing      fair, tamper-evident timing: unseen images, answers checked, clocks bounded
    memory      the peak memory in each row (the references' beside it), and the gate on it (peak_mb)
    deadlines   each exchange's deadline, from the reference's own times
    files       a submission folder read as hostile input, copied into the worker's private copy
    store       the grading's folder OUT: rows with MACs, the students list, regrades
    slurm       the grading as a Slurm job array, and the merge job's rows

May import: harness.lab.box, harness.lab.text and the harness's wings below the lab; never
harness.lab.term (tests/test_layout.py).
"""
