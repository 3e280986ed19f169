"""Staff only: pairwise code similarity of a class.

    similarity  `lab similarity`: the flagged pairs, their side-by-side pages (staff only)
    fingerprints a submission's code as one document, and its winnowed fingerprints

May import: harness.lab.judge, harness.lab.box, harness.lab.text, the term's other sub-packages
and the harness's wings below the lab (tests/test_layout.py).
"""
