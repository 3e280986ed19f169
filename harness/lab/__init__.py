"""Lab assignments: grading a class's submissions in sandboxed workers, Slurm job arrays, leaderboard."""
