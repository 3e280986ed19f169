"""The box: one untrusted process made safe, and the grader's side of talking to it.

    worker      the process inside the box: drops its privileges, loads one class, answers over pipes
    sandbox     the grader's side of a worker: requests with deadlines, images streamed, Chunk
    replies     every reply of a worker checked before it is believed
    process     Box: the worker's process started, counted, watched and killed with all it started
    launch      what the worker is started with: its command (bwrap, seccomp), environment and folder
    death       why it ended: signal, exit code, out-of-memory kills, the end of its log
    limits      Limits (what a box enforces), the rlimits set between fork and exec, its capped log
    procfs      the worker's process read from outside: found under bwrap, its CPU clock, its memory
    peak        its peak memory, read from outside: its cgroup's high-water mark, else its VmHWM
    bwrap       the sandbox's view (bubblewrap): namespaces, the few files it sees
    seccomp     the system calls it is denied (keyrings)
    cgroup      its own cgroup: pids and memory limits, the CPU counter that times it, the kill
    disk        its bounded writable space (one tmpfs: size and inodes)
    isolation   which isolation this machine gives (full, namespaces only, none) and the slots' UIDs
    libpath     the library paths a GPU worker needs (sudo clears LD_LIBRARY_PATH)

May import: harness.lab.text and the harness's wings below the lab; never harness.lab.judge or
harness.lab.term (tests/test_layout.py). This file imports nothing: the sandbox shows it to the
worker (bwrap.VISIBLE), and the worker must not pull in more than it can see.
"""
