"""The box: one untrusted process made safe, and the grader's side of talking to it.

    worker      the process inside the box: drops its privileges, loads one class, answers over pipes
    tasks       the worker's data ops: timed calls, one stage on the oracle's input, SGD steps,
                weights, and a call of a function the grader names (a kind's own work)
    sandbox     the grader's side of a worker: requests with deadlines, images streamed, Chunk
    replies     every reply of a worker checked before it is believed
    proc/       the worker's process: lifecycle (Box: started, counted, watched and killed with all
                it started), launch (its command, environment, folder), limits (rlimits, its capped
                log), peak (its peak memory, read from outside), death (why it ended), relay (the
                start of a worker's Slurm step: its pipes and limits handed over, then exec)
    walls/      each mechanism the system gives: bwrap (the view), seccomp, cgroup (limits, the CPU
                counter, the kill), disk (its bounded writable space), procfs (the process read from
                outside), libpath, isolation (full, namespaces only, none; the slots' UIDs),
                slurmstep (a worker as a Slurm job step of its own: its CPU counter without root)

Its rooms import one way: the box's own modules -> proc -> walls (tests/test_layout.py).

May import: harness.lab.text and the harness's wings below the lab; never harness.lab.judge or
harness.lab.term (tests/test_layout.py). This file imports nothing: the sandbox shows it to the
worker (bwrap.VISIBLE), and the worker must not pull in more than it can see.
"""
