"""The term: course staff's steps around a grading, and the students' side of a lab, one
sub-package per step of the course (docs/staff.md):

    handout     kit, student, check: the students' kit and `lenet-lab`, `lab check`
    intake      collect, handin, lms, times, unzip, clones: `lab collect` (an LMS's download or clones)
    marks       points, leaderboard, plots, feedback, export: the rows' points, pages and gradebook CSV
    public      publish, alias, names: the public page under pseudonyms
    cli         the `python -m harness lab ...` commands: their arguments, each one call of what does it
    commands    what each `python -m harness lab ...` command does
    gpu_labs    gpu-study's `labs` step: the GPU labs' examples graded as staff grade them
    bench       `lab bench`: a synthetic class graded and timed, one row per student checked
    similarity  `lab similarity`: pairwise code similarity of a class, the flagged pairs and their
                side-by-side pages (staff only)
    fingerprints a submission's code as one document, and its winnowed fingerprints (similarity's)
    templates/  the public page's and the similarity view's Jinja templates

May import: harness.lab.judge, harness.lab.box, harness.lab.text and the harness's wings below
the lab (tests/test_layout.py).
"""
