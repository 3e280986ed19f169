"""The lab file and the rules a grading keeps.

    assignment  the lab file (labs/NAME.toml): what is graded, beside which references, the limits
    tables      its [measure], [gate], [limits] and [grade] tables, each a record and its checks
    timing      fair, tamper-evident timing: unseen images, answers checked, clocks bounded
    deadlines   each exchange's deadline, from the reference's own times
    sgd         the training gate's rule: SGD steps against the oracle's (grader and kit)
    kinds       the kinds of lab task (inference, training, CUDA kernels), one object each: what
                differs between them
    stages      partial credit by stage: the stages and their verdicts (NumPy alone: a kit ships it)
    oracle      the oracle's answers (grader only: it imports the NumPy level): stages, SGD steps, backward
    backprop    a training lab's stages: each layer's backward on the oracle's activation and upstream

May import: harness.lab.box, harness.lab.text and the harness's wings below the lab; no other room of
the judge (tests/test_layout.py).
"""
