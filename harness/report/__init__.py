"""From result files to REPORT.md and figures (no framework imported): runs, tables, figures, LOC."""
