"""The students' side of a lab: what they are handed and run before the deadline.

    kit         `lab kit`: dist/lab-kit-LAB.zip (the interface, the weights, the starter, the gate data)
    student     the kit's `lenet-lab` command: the gate and a time per image, on the student's machine
    trainkit    a training lab's check in the kit: the grader's gate, shapes and stages (rules.sgd,
                backprop, stages) against the oracle's answers shipped precomputed
    trainreadme a training lab's kit README, gate data and advice (built here, never shipped)
    cudareadme  the CUDA lab's kit README (an inference lab's, and its kernels without a GPU)
    advice      what a training student is told next, by kind of failure (feedback and kit alike)
    check       `lab check`: a student's own quick grading of one file, with its feedback

May import: harness.lab.judge, harness.lab.box, harness.lab.text, the term's other sub-packages
and the harness's wings below the lab (tests/test_layout.py).
"""
