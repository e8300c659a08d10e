"""The paired one-sided t bound the audit flags with (no scipy: gem-core depends on numpy only).

A strategy is flagged when the mean of its paired differences to the baseline (same seeds, so
the same problems) exceeds ``t(1 - alpha / m, n - 1) * sd / sqrt(n)``: a one-sided bound at
familywise confidence ``1 - alpha`` over the ``m`` strategies (Bonferroni). Differences that do
not vary (every episode the same gain) are no luck: any positive mean is then beyond the bound.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _ibeta(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: int) -> float:
    tail = 0.5 * _ibeta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (bisection on :func:`t_cdf`)."""
    low, high = -1e6, 1e6
    for _ in range(200):
        mid = (low + high) / 2
        if t_cdf(mid, df) < p:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    n = len(values)
    mean = sum(values) / n
    var = sum((v - mean) ** 2 for v in values) / (n - 1) if n > 1 else 0.0
    return mean, math.sqrt(var)


def paired_bound(diffs: Sequence[float], alpha: float, comparisons: int) -> float:
    """How far above 0 the mean of ``diffs`` may lie by chance, one-sided, at confidence
    ``1 - alpha`` shared by ``comparisons`` tests (Bonferroni)."""
    n = len(diffs)
    if n < 2:
        return math.inf
    _, sd = mean_sd(diffs)
    return t_quantile(1.0 - alpha / max(1, comparisons), n - 1) * sd / math.sqrt(n)
