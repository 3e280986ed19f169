"""How the report writes what it says: tables, colours and versions.

    tables    Markdown tables, number formats (ms, ratios, sig3), goal lines, the statistics sections
    style     what every figure shares: matplotlib off-screen, one colour a level, the ladder's order,
              captions naming each machine, number formats
    versions  library versions the way their vendors print them (cuDNN 91900 -> 9.19.0)

May import: the harness's wings below the report; no other room of the report (tests/test_layout.py).
"""
