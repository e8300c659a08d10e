"""GEM math envs: datasets with a supervised grader, procedural math, reasoning-gym."""
