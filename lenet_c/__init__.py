"""LeNet-5 in C, compiled at run time by the system C compiler for this CPU (model.py)."""
