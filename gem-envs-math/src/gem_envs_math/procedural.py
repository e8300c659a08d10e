"""Generated math problems with exact answers: arithmetic, algebra, number theory.

Every problem is drawn from the env's own RNG, so ``reset(seed=s)`` always poses the
same problem and the supply never runs out: RL runs need no dataset at all. Answers are
exact (integers, reduced fractions, tuples) and graded like any dataset answer.

>>> env = ProceduralMathEnv(topics=["number_theory"], difficulty="easy")
>>> question, info = env.reset(seed=0)
>>> env.step(f"\\\\boxed{{{env.answer}}}")[1]
1.0
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import gem
from gem.conventions import FORMAT_ERROR
from gem.core import StepResult
from gem.reward_range import graded
from gem_envs_math.env import TERMINAL_STATE, audit_answers
from gem_envs_math.grading import grade

DIFFICULTIES = {"easy": 1, "medium": 2, "hard": 3}
INSTRUCTION = "Put your final answer within \\boxed{}."

Generator = Callable[[random.Random, int], tuple[str, str]]


def _fraction_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"


def _terms(pairs: Sequence[tuple[int, str]]) -> str:
    """``[(3, "x^{2}"), (-1, "x"), (5, "")]`` -> ``3x^{2} - x + 5`` (zero terms dropped)."""
    text = ""
    for coefficient, variable in pairs:
        if coefficient == 0:
            continue
        magnitude = abs(coefficient)
        body = f"{'' if magnitude == 1 and variable else magnitude}{variable}"
        if not text:
            text = f"-{body}" if coefficient < 0 else body
        else:
            text += f" {'-' if coefficient < 0 else '+'} {body}"
    return text or "0"


def _frac_latex(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


# -- arithmetic --------------------------------------------------------------------------
def _expression(rng: random.Random, depth: int, high: int) -> tuple[str, int]:
    if depth == 0:
        value = rng.randint(1, high)
        return str(value), value
    left, lv = _expression(rng, rng.randint(0, depth - 1), high)
    right, rv = _expression(rng, rng.randint(0, depth - 1), high)
    op = rng.choice("+-*")
    value = {"+": lv + rv, "-": lv - rv, "*": lv * rv}[op]
    return f"({left} {op} {right})", value


def integer_expression(rng: random.Random, level: int) -> tuple[str, str]:
    """Evaluate a random integer expression with + - * and brackets."""
    text, value = _expression(rng, level + 1, 10 ** level)
    return f"Compute {text[1:-1]}.", str(value)


def fraction_arithmetic(rng: random.Random, level: int) -> tuple[str, str]:
    """Add, subtract or multiply fractions; the answer in lowest terms."""
    terms = [Fraction(rng.randint(1, 6 * level), rng.randint(2, 6 * level + 2)) for _ in range(level + 1)]
    ops = [rng.choice("+-*") for _ in terms[1:]]
    value, text = terms[0], _frac_latex(terms[0])
    for op, term in zip(ops, terms[1:]):
        value = {"+": value + term, "-": value - term, "*": value * term}[op]
        symbol = "\\times" if op == "*" else op
        text = f"\\left({text} {symbol} {_frac_latex(term)}\\right)"
    return f"Compute ${text}$ and give the result as a fraction in lowest terms.", _fraction_text(value)


def percentage(rng: random.Random, level: int) -> tuple[str, str]:
    """A percentage of a number."""
    percent = rng.choice([5, 10, 12, 15, 20, 25, 30, 40, 50, 75]) if level == 1 else rng.randint(1, 99 * level)
    whole = rng.randint(2, 40 * 10 ** (level - 1)) * rng.choice([1, 4, 20])
    return f"What is {percent}% of {whole}?", _fraction_text(Fraction(percent * whole, 100))


# -- algebra -----------------------------------------------------------------------------
def _nonzero(rng: random.Random, high: int) -> int:
    return rng.choice([i for i in range(-high, high + 1) if i != 0])


def linear_equation(rng: random.Random, level: int) -> tuple[str, str]:
    """Solve ``a x + b = c x + d``; at the hardest level the solution may be a fraction."""
    high = 5 * level
    denominator = 1 if level < 3 else rng.randint(1, 4)
    x = Fraction(rng.randint(-high, high), denominator)
    # a - c is a multiple of x's denominator, so every coefficient stays an integer
    a = c = _nonzero(rng, high)
    while a in (0, c):
        a = c + denominator * _nonzero(rng, level + 1)
    b = rng.randint(-4 * high, 4 * high)
    d = int((a - c) * x) + b
    return f"Solve for $x$: ${_terms([(a, 'x'), (b, '')])} = {_terms([(c, 'x'), (d, '')])}$.", _fraction_text(x)


def linear_system(rng: random.Random, level: int) -> tuple[str, str]:
    """Two linear equations in two unknowns with an integer solution; answer ``(x, y)``."""
    high = 4 * level
    x, y = rng.randint(-high, high), rng.randint(-high, high)
    while True:
        a, b, c, d = (_nonzero(rng, high) for _ in range(4))
        if a * d - b * c != 0:
            break
    first, second = a * x + b * y, c * x + d * y
    equations = f"${_terms([(a, 'x'), (b, 'y')])} = {first}$ and ${_terms([(c, 'x'), (d, 'y')])} = {second}$"
    return f"Solve the system {equations}. Answer as an ordered pair $(x, y)$.", f"({x}, {y})"


def quadratic_roots(rng: random.Random, level: int) -> tuple[str, str]:
    """A quadratic with integer roots; asks for the larger root or the sum of squares."""
    high = 6 * level
    r, s = rng.randint(-high, high), rng.randint(-high, high)
    k = rng.randint(1, level)
    b, c = -k * (r + s), k * r * s
    poly = _terms([(k, "x^2"), (b, "x"), (c, "")])
    if level == 1 or rng.random() < 0.5:
        return f"What is the larger root of ${poly} = 0$?", str(max(r, s))
    return f"Let $p$ and $q$ be the roots of ${poly} = 0$. Compute $p^2 + q^2$.", str(r * r + s * s)


def polynomial_value(rng: random.Random, level: int) -> tuple[str, str]:
    """Evaluate a polynomial at an integer point."""
    degree = level + 1
    coefficients = [rng.randint(-9, 9) for _ in range(degree)] + [_nonzero(rng, 9)]
    x = rng.randint(-3 * level, 3 * level)
    text = _terms([(a, f"x^{{{i}}}" if i > 1 else "x" * i) for i, a in reversed(list(enumerate(coefficients)))])
    value = sum(a * x**i for i, a in enumerate(coefficients))
    return f"Let $f(x) = {text}$. Compute $f({x})$.", str(value)


# -- number theory ------------------------------------------------------------------------
def gcd_lcm(rng: random.Random, level: int) -> tuple[str, str]:
    """The gcd or lcm of two or three numbers."""
    base = rng.randint(2, 12 * level)
    numbers = [base * rng.randint(1, 10 * level) for _ in range(1 + level)]
    if rng.random() < 0.5:
        return f"What is the greatest common divisor of {', '.join(map(str, numbers))}?", str(math.gcd(*numbers))
    return f"What is the least common multiple of {', '.join(map(str, numbers))}?", str(math.lcm(*numbers))


def modular_power(rng: random.Random, level: int) -> tuple[str, str]:
    """The remainder of a power."""
    base, exponent = rng.randint(2, 10 * level), rng.randint(2, 10 ** level)
    modulus = rng.randint(3, 10 * level + 7)
    question = f"What is the remainder when ${base}^{{{exponent}}}$ is divided by {modulus}?"
    return question, str(pow(base, exponent, modulus))


def divisor_count(rng: random.Random, level: int) -> tuple[str, str]:
    """The number of positive divisors of a number."""
    n = 1
    for prime in rng.sample([2, 3, 5, 7, 11, 13], 1 + level):
        n *= prime ** rng.randint(1, 2 + level)
    count = math.prod(e + 1 for e in _factorize(n).values())
    return f"How many positive divisors does {n} have?", str(count)


def _factorize(n: int) -> dict[int, int]:
    factors: dict[int, int] = {}
    p = 2
    while p * p <= n:
        while n % p == 0:
            factors[p] = factors.get(p, 0) + 1
            n //= p
        p += 1
    if n > 1:
        factors[n] = factors.get(n, 0) + 1
    return factors


def digit_sum_of_power(rng: random.Random, level: int) -> tuple[str, str]:
    """The sum of the digits of a power."""
    base, exponent = rng.randint(2, 9), rng.randint(5, 12 * level)
    return f"What is the sum of the digits of ${base}^{{{exponent}}}$?", str(sum(map(int, str(base**exponent))))


TOPICS: dict[str, tuple[Generator, ...]] = {
    "arithmetic": (integer_expression, fraction_arithmetic, percentage),
    "algebra": (linear_equation, linear_system, quadratic_roots, polynomial_value),
    "number_theory": (gcd_lcm, modular_power, divisor_count, digit_sum_of_power),
}


def generate(rng: random.Random, topics: Sequence[str], level: int) -> tuple[str, str, str]:
    """One problem: ``(topic, question, answer)``, drawn from ``rng``."""
    topic = rng.choice(list(topics))
    question, answer = rng.choice(TOPICS[topic])(rng, level)
    return topic, question, answer


class ProceduralMathEnv(gem.Env):
    """Single-turn generated math: reward 1.0 for the right final answer, 0.0 for a wrong
    one, ``format_error_reward`` when none can be found.

    ``topics``: any of ``arithmetic``, ``algebra``, ``number_theory`` (default: all);
    ``difficulty``: ``easy``, ``medium`` or ``hard``.
    """

    #: rewards lie in [min(0, format_error_reward), 1]; gem.Env turns any other into a grading failure
    reward_range = graded

    def __init__(
        self,
        topics: Sequence[str] | None = None,
        difficulty: str = "medium",
        format_error_reward: float = 0.0,
        grade_timeout: float | None = None,
    ) -> None:
        self.topics = list(topics) if topics else list(TOPICS)
        unknown = [t for t in self.topics if t not in TOPICS]
        if unknown:
            raise ValueError(f"unknown topic(s) {unknown}; known: {', '.join(TOPICS)}")
        if difficulty not in DIFFICULTIES:
            raise ValueError(f"difficulty must be one of {', '.join(DIFFICULTIES)}, got {difficulty!r}")
        self.difficulty = difficulty
        self.format_error_reward = float(format_error_reward)
        self.grade_timeout = grade_timeout
        self.topic: str | None = None
        self.question: str | None = None
        self.answer: str | None = None

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.topic, self.question, self.answer = generate(self.rng, self.topics, DIFFICULTIES[self.difficulty])
        return f"{self.question} {INSTRUCTION}", {"topic": self.topic}

    def step(self, action: str) -> StepResult:
        if self.answer is None:
            raise RuntimeError("call reset() before step()")
        result = grade(action if isinstance(action, str) else str(action), self.answer, timeout=self.grade_timeout)
        reward = 1.0 if result.correct else (self.format_error_reward if result.format_error else 0.0)
        info = {
            "correct": result.correct,
            FORMAT_ERROR: result.format_error,
            "extracted_answer": result.extracted,
            "grade_status": result.status,
            "reference_answer": self.answer,
        }
        return TERMINAL_STATE, reward, True, True, info

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.rng.randint(-20, 100)}}}"

    def audit_answers(self) -> tuple[str, str]:
        """``gem audit``'s right and wrong in-format answers (:mod:`gem.audit`)."""
        return audit_answers(self.answer)

    def get_state(self) -> dict[str, Any]:
        return {"rng": self.rng_state(), "topic": self.topic, "question": self.question, "answer": self.answer}

    def set_state(self, state: dict[str, Any]) -> None:
        self.set_rng_state(state["rng"])
        self.topic, self.question, self.answer = state["topic"], state["question"], state["answer"]
