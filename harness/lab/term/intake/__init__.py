"""Collect: an LMS's bulk download, or a folder of git clones, into one folder per student and a
manifest; one student's bad hand-in refused alone, a bad download refused whole.

    collect     `lab collect`: the zip's entries or the clones into folders, hashes.json, manifest.csv
    download    the LMS's zip read entry by entry: whose hand-in each entry is, its files, refusals
    handin      one hand-in (Submission) and the folder it goes to (folder_name)
    lms         how Canvas and Moodle name the files of their bulk download
    times       the LMS's own submission times (Canvas's Submissions API, Moodle's worksheet)
    unzip       a zip read as hostile input; Refused (one student's) apart from the archive's refusals
    clones      git clones read as data, never as code

May import: harness.lab.judge, harness.lab.box, harness.lab.text, the term's other sub-packages
and the harness's wings below the lab (tests/test_layout.py).
"""
