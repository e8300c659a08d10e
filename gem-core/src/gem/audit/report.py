"""Flags from the paired figures, the readable table and the JSON figures."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gem.audit.stats import mean_sd, paired_bound


@dataclass
class StrategyResult:
    name: str
    describe: str
    mean: float
    #: mean paired difference to the baseline, and how far above 0 chance may put it
    gain: float
    bound: float
    flagged: bool
    severe: bool


@dataclass
class EnvAudit:
    env_id: str
    episodes: int
    seed: int
    alpha: float
    baseline_name: str = ""
    baseline_mean: float | None = None
    right_mean: float | None = None
    strategies: list[StrategyResult] = field(default_factory=list)
    #: episodes that scored the env's failure reward because reset/step raised, hung or misbehaved
    errors: list[str] = field(default_factory=list)
    setup_error: str | None = None
    #: why the env was not audited although it is fine (its dataset is not available here)
    skipped: str | None = None
    seconds: float = 0.0
    #: lanes played at once on separate env instances (1: one after another)
    jobs: int = 1

    @property
    def flagged(self) -> list[StrategyResult]:
        return [s for s in self.strategies if s.flagged]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "confidence": 1 - self.alpha}


def judge(env_id: str, episodes: int, seed: int, alpha: float, baseline_name: str, baseline: list[float],
          right: list[float] | None, played: dict[str, tuple[Any, list[float]]]) -> EnvAudit:
    """Flag a strategy whose paired gain over the baseline exceeds the one-sided t bound at
    familywise confidence ``1 - alpha`` (Bonferroni over the strategies); call it severe when,
    in addition, the right answer's paired gain over it is within the same kind of bound."""
    audit = EnvAudit(env_id, episodes, seed, alpha, baseline_name, mean_sd(baseline)[0],
                     mean_sd(right)[0] if right else None)
    m = len(played)
    for name, (strategy, rewards) in played.items():
        diffs = [r - b for r, b in zip(rewards, baseline)]
        gain, bound = mean_sd(diffs)[0], paired_bound(diffs, alpha, m)
        flagged = gain > bound and gain > 1e-12
        severe = False
        if flagged and right is not None:
            behind = [a - r for a, r in zip(right, rewards)]
            severe = mean_sd(behind)[0] <= paired_bound(behind, alpha, m)
        audit.strategies.append(StrategyResult(name, strategy.describe, mean_sd(rewards)[0], gain, bound,
                                               flagged, severe))
    return audit


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(audit: EnvAudit) -> str:
    """A readable table for one env."""
    head = f"{audit.env_id}: {audit.episodes} episodes from seed {audit.seed}, {audit.seconds:.1f} s"
    if audit.jobs > 1:
        head += f" ({audit.jobs} lanes at once)"
    if audit.skipped:
        return f"{head}\n  skipped, its data is not available here: {audit.skipped}"
    if audit.setup_error:
        return f"{head}\n  could not make the env: {audit.setup_error}"
    lines = [head,
             f"  baseline ({audit.baseline_name}) mean {_num(audit.baseline_mean)}; right answer mean "
             f"{_num(audit.right_mean) if audit.right_mean is not None else 'unknown (no audit_answers)'}",
             f"  {'strategy':<16}{'mean':>8}{'gain':>9}{'bound':>9}  verdict"]
    for s in audit.strategies:
        verdict = "SEVERE" if s.severe else "FLAGGED" if s.flagged else "ok"
        lines.append(f"  {s.name:<16}{s.mean:>8.3f}{s.gain:>+9.3f}{s.bound:>9.3f}  {verdict}")
    if audit.errors:
        lines.append(f"  {len(audit.errors)} episode(s) scored the env's failure reward because the env failed, "
                     f"first: {audit.errors[0]}")
    return "\n".join(lines)
