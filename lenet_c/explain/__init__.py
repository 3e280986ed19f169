"""Where the C level's time goes (not part of the level's inference code, so not in its line count)."""
