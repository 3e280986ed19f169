"""The term: course staff's steps around a grading, and the students' side of a lab.

    kit, student    the students' kit (dist/lab-kit-LAB.zip) and its `lenet-lab` command
    check           `lab check`: a student's own quick grading of one file, with its feedback
    collect         an LMS's bulk download or a folder of git clones -> one folder per student;
                    with handin (one hand-in), lms (how Canvas and Moodle name files), times (the LMS's
                    own submission times), unzip (a zip read as hostile input), clones (git, read
                    as data)
    leaderboard     OUT/LEADERBOARD.md and leaderboard.csv from the rows; plots (its figure and the
                    histograms), feedback (each student's page), points (a row's points, lateness)
    export          the points as an LMS's gradebook-import CSV
    publish         the public page under pseudonyms: alias (the pseudonyms), names (a name in any form)
    similarity      pairwise code similarity of a class (staff only); fingerprints (a submission's
                    code as one document, and its winnowed fingerprints)
    commands        what each `python -m harness lab ...` command does (harness/commands.py parses)

May import: harness.lab.judge, harness.lab.box, harness.lab.text and the harness's wings below
the lab (tests/test_layout.py).
"""
