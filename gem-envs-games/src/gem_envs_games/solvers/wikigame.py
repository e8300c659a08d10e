"""WikiGame's solver (the shortest path over the ZIM's links) under the solvers' common name."""

from gem_envs_games.wikigame import WikiGameSolver as Solver

__all__ = ["Solver"]
