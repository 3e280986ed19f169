"""The students' side of a lab: what they are handed and run before the deadline.

    kit         `lab kit`: dist/lab-kit-LAB.zip (the interface, the weights, the starter, the gate data)
    student     the kit's `lenet-lab` command: the gate and a time per image, on the student's machine
    check       `lab check`: a student's own quick grading of one file, with its feedback

May import: harness.lab.judge, harness.lab.box, harness.lab.text, the term's other sub-packages
and the harness's wings below the lab (tests/test_layout.py).
"""
