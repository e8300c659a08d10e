"""The reward and info conventions every GEM env follows (GEM-compatible).

Suites and the trainer import these instead of defining their own:

>>> from gem.conventions import FORMAT_ERROR, FORMAT_ERROR_REWARD
>>> FORMAT_ERROR_REWARD
-0.1
>>> FORMAT_ERROR
'format_error'

- **Format error.** An action the env cannot read (no ``\\boxed{}`` move, no answer tag,
  no code block, ...) ends the episode (``terminated``) with the env's format-error reward,
  :data:`FORMAT_ERROR_REWARD` unless the env was made with another (the reference's
  single-turn math and QA envs default to 0.0 and keep that default), and
  ``info["format_error"] = True`` on that step. An env that can score a format error sets
  ``info["format_error"] = False`` on its other steps, so a trainer or an eval tells a
  wrong answer from an unreadable one by the flag, never by comparing rewards. A tool step
  of ``gem_tools.ToolEnvWrapper`` is not a format error. :func:`gem.testing.check_env`
  checks that the flag is a bool and that a format error ends the episode.
- **Rewards.** Success 1.0; an invalid but readable move 0.0; dense intermediate rewards
  where the game has them.
"""

from __future__ import annotations

#: reward of an action the env cannot read (no ``\\boxed{}`` move, no answer tag, ...); the episode ends
FORMAT_ERROR_REWARD = -0.1
#: the ``info`` key that marks a format error: True on that step, False on the env's other steps
FORMAT_ERROR = "format_error"
