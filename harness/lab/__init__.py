"""Lab assignments: grading a class's submissions in limited workers, Slurm job arrays, leaderboard."""
