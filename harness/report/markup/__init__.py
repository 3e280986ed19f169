"""How the report writes what it says: tables, colours and words.

    tables    Markdown tables, number formats (ms, ratios, sig3), speed-up verdicts
    quote     how a measured number is quoted anywhere: its median, its interval where the rounds
              support one, the marks that tell a reader not to take it at face value
    style     what the report shares with its figures (harness.figures.style): the ladder's order,
              the cells a study drew, each device's line style
    words     the templates (harness/report/templates/) rendered from claims, with the wing's filters

May import: the harness's wings below the report; no other room of the report (tests/test_layout.py).
"""
