"""GEM question-answering envs: single-turn QA scored by SQuAD-style exact match, and the
same questions with a search tool over an offline corpus.

>>> import gem
>>> env = gem.make("eval:TriviaQA")                              # doctest: +SKIP
>>> question, info = env.reset(idx=0)                            # doctest: +SKIP
>>> env.step("<think>...</think> <answer>Sunset Boulevard</answer>")[1]  # doctest: +SKIP
1.0
"""

from gem_envs_qa.metrics import contains_answer, exact_match, f1_score, normalize_answer

__all__ = ["contains_answer", "exact_match", "f1_score", "normalize_answer"]
