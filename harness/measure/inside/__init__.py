"""Inside a study's worker process: one level timed on request, its training steps, its memory.

    worker    the worker process (python -m harness.measure.inside.worker): one implementation, timed
    training  train mode: each timed call one SGD step of the level's trainer
    memory    what a level costs besides time: host memory by stage, GPU memory, what it installed
    requires  what a pip install of a level needs: its own distributions' Requires-Dist closure

May import: the harness's wings below measure; no other room of measure (a worker imports little).
"""
