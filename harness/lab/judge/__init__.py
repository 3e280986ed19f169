"""The judge: a lab file, and a class's grading under it.

    grade       grade_all (every submission of a class, row by row: resume, only, retries) and the
                Grader (one submission's row, start to finish)
    attempts    each submission's attempts at grading and who ended each (a signal to the grader is
                never the submission's); the capped retries' `ungraded` row; which rows are finished
    files       a submission folder read as hostile input, copied into the worker's private copy
    store       the grading's folder OUT: rows with MACs, the students list, regrades
    slurm       the grading as Slurm job arrays (K students a task) and a merge job, submitted
    slurm_task  what runs on the cluster: a task (its students claimed and graded), the merge's rows
    student_lock  a grader's lock on one student, safe on a shared filesystem (no two graders write one)
    progress    where a grading stands (`lab status`): each student's state, a Slurm round's jobs
    phases/     the Grader's phases, one class on the last: prepare (the oracle, images and spaces),
                references (their workers, the deadlines' pace), steps (one submission's), verdict (its
                clocks checked, its times ranked), memory (the peak in each row, and its gate)
    rules/      assignment + tables (the lab file: what is graded, beside which references, the limits;
                its tables, each a record and its checks), timing (fair, tamper-evident timing),
                deadlines (each exchange's, from the reference's own times)

Its rooms import one way: the judge's own modules -> phases -> rules (tests/test_layout.py).

May import: harness.lab.box, harness.lab.text and the harness's wings below the lab; never
harness.lab.term (tests/test_layout.py).
"""
