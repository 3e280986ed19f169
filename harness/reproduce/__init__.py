"""A study run again in fresh processes, each cell held against its newest run on this machine."""
