"""Publish: the public page under pseudonyms, no names anywhere.

    publish     `lab publish`: index.html, leaderboard.png, leaderboard.csv from an allow-list of fields
    alias       the pseudonyms (a student's alias.txt, checked), kept in OUT/private
    names       a name in any form (folded, run together, reversed), to refuse an alias naming one

May import: harness.lab.judge, harness.lab.box, harness.lab.text, the term's other sub-packages
and the harness's wings below the lab (tests/test_layout.py).
"""
