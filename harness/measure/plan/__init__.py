"""A study's plan: its file, a quick run's narrowing of it, and each cell's state through a run.

    study     studies/NAME.toml -> Study (its Measure and its Cells)
    narrow    a quick run: the study narrowed to some levels, rounds, processes (never an answer)
    cells     one cell's state through a run, and the final `cell` row made from it

May import: harness.measure.store and the harness's wings below measure (tests/test_layout.py).
"""
