"""Marks: what a grading's rows come to for the class and for the LMS.

    points      a row's points, ties where intervals overlap, lateness
    extensions  a student's own due date (OUT/extensions.csv), for lateness, export and feedback
    leaderboard OUT/LEADERBOARD.md and leaderboard.csv from the rows
    machines    machine types: each kind of node ranked on its own
    plots       the leaderboard's figure and each student's histogram
    feedback    each student's page
    export      `lab export`: the points as an LMS's gradebook-import CSV

May import: harness.lab.judge, harness.lab.box, harness.lab.text, the term's other sub-packages
and the harness's wings below the lab (tests/test_layout.py).
"""
