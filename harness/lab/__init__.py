"""Grading a class's lab submissions, in three rooms that import one way: term -> judge -> box (+ text)."""
