"""The worker's process: started inside the walls, limited, watched, and why it ended.

    lifecycle Box: the worker's process started, counted, watched and killed with all it started
    launch    what the worker is started with: its command (bwrap, seccomp), environment and folder
    limits    Limits (what a box enforces), the rlimits set between fork and exec, its capped log
    peak      its peak memory, read from outside: its cgroup's high-water mark, else its VmHWM
    death     why it ended: signal, exit code, out-of-memory kills, the end of its log
    relay     the start of a worker's Slurm step: its descriptors placed, its limits set, exec

May import: harness.lab.box.walls, harness.lab.text and the harness's wings below the lab
(tests/test_layout.py).
"""
