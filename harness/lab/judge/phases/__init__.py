"""The Grader's phases, what each checks (its methods are in harness.lab.judge.grade.Grader): the
oracle and images, the references, the steps, the verdict.

    prepare     the oracle, the images and the spaces
    references  the references' workers and the deadlines' pace
    steps       one submission's steps
    verdict     its clocks checked and its times ranked
    training    a training lab's steps (one SGD step, gated as verify-train, timed step by step)
    memory      the peak memory in each row (the references' beside it), and the gate on it (peak_mb)

May import: harness.lab.judge.rules, harness.lab.box, harness.lab.text and the harness's wings below
the lab (tests/test_layout.py).
"""
