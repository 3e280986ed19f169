"""The box's walls: each mechanism the system gives, one module each.

    bwrap      the sandbox's view (bubblewrap): namespaces, the few files it sees
    seccomp    the system calls it is denied (keyrings)
    cgroup     its own cgroup: pids and memory limits, the CPU counter that times it, the kill
    disk       its bounded writable space (one tmpfs: size and inodes)
    procfs     the worker's process read from outside: found under bwrap, its CPU clock, its memory
    libpath    the library paths a GPU worker needs (sudo clears LD_LIBRARY_PATH)
    isolation  which isolation this machine gives (full, namespaces only, none) and the slots' UIDs
    slurmstep  a worker as a Slurm job step of its own, its CPU counted by the step's cgroup (no root)

May import: harness.lab.text and the harness's wings below the lab; no other room of the box
(tests/test_layout.py).
"""
