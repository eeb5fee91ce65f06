"""Whether two sets of runs of one metric differ: `judge`, the one rule `compare` (and what builds on it) asks.

Side a is the reference, side b the one judged against it; each is the metric's values over runs of one measured
state (or a single run's per-request samples, docs/FORMATS.md). What `judge` gives:

- `n_a`, `n_b` and the `median` of each side;
- `effect`: the Hodges–Lehmann shift (the median of every difference b − a) relative to a's median, `+0.05` for
  5% higher; `None` when a's median is 0;
- `ci_low`, `ci_high`: its distribution-free 95% confidence interval (1 − alpha), read off the sorted pairwise
  differences at the Mann–Whitney critical value (the exact null distribution where `p` takes it, the normal
  approximation elsewhere); `None` when the sides are too small for that confidence. Above 2,000 values a side the
  differences are taken over a seeded random subsample of 2,000 (deterministic);
- `p`: Mann–Whitney U, two-sided: exact without ties up to 25 values a side (and for unequal sides whose
  arrangements still count exactly, 1 + 40 or 5 + 27: `_exact`), else `scipy.stats.mannwhitneyu`'s normal
  approximation (tie and continuity corrected);
- `verdict`: `faster` / `slower` (a known direction: higher is better for a throughput, lower for a latency; a
  metric that is no speed, whose direction the lab declared, says `better` / `worse`) or `higher` / `lower`
  (direction unknown) only when p < alpha, the interval excludes 0 and |effect| ≥ min_effect;
  `too few runs` when the sides are too small for the exact test ever to reach alpha (`fewest_runs`: 4 + 4 at
  0.05); else `no significant change`. A difference within 1e-9 of the values (float rounding) is no difference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

REL_TOL = 1e-9  # a difference this small against the values is float rounding, not a change
EXACT_UP_TO = 25  # values a side up to which the interval uses the exact null distribution of U
EXACT_PAIRS = 20000  # beyond it, pairs up to which unequal sides still take the exact distribution (`_exact`)
SUBSAMPLE = 2000  # values a side above which the pairwise differences are taken over a seeded subsample
SEED = 32
VERDICTS = ("faster", "slower", "better", "worse", "higher", "lower", "no significant change", "too few runs")


@dataclass(frozen=True)
class Judgement:
    n_a: int
    n_b: int
    median_a: float
    median_b: float
    effect: float | None  # Hodges–Lehmann shift relative to median_a; None when median_a is 0
    ci_low: float | None  # its 1 − alpha interval, relative like effect; None: too few values for it
    ci_high: float | None
    p: float | None  # Mann–Whitney U two-sided; None with an empty side
    verdict: str


def _too_few(m: int, n: int, alpha: float = 0.05) -> bool:
    """Whether m and n values are too few for the exact two-sided Mann–Whitney test ever to give p < alpha:
    its smallest p is 2 / C(m+n, m)."""
    return m < 1 or n < 1 or 2 / math.comb(m + n, m) >= alpha


def fewest_runs(alpha: float = 0.05) -> dict[int, int]:
    """{runs on one side: the fewest on the other for which the test can reach alpha}, for 1..the symmetric n."""
    table: dict[int, int] = {}
    m = 1
    while m not in table.values():
        n = m
        while _too_few(m, n, alpha):
            n += 1
        table[m] = n
        if n <= m:
            break
        m += 1
    return table


def judge(a: Sequence[float], b: Sequence[float], *, direction: str = "", min_effect: float = 0.01,
          alpha: float = 0.05, words: tuple[str, str] = ("faster", "slower")) -> Judgement:  # fmt: skip
    """b judged against a (see the module's docstring); direction "higher", "lower" or "" (unknown); `words`: what
    a change for the better and for the worse is called (evidence/metrics.verdict_words: `better`/`worse` for a
    metric that is no speed, a quality score)."""
    import numpy as np

    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    m, n = len(xa), len(xb)
    if not m or not n:
        nan = math.nan
        return Judgement(m, n, _median(xa) if m else nan, _median(xb) if n else nan, None, None,
                         None, None, "too few runs")  # fmt: skip
    scale = max(float(np.max(np.abs(xa))), float(np.max(np.abs(xb)))) or 1.0
    with np.errstate(over="ignore"):  # an inf median of values near the float limit is taken scaled below
        shown = [_median(x) for x in (xa, xb)]
    xa, xb = xa / scale, xb / scale  # medians and differences of values near the float limit stay finite
    med_a, med_b = _median(xa), _median(xb)
    shown = [v if math.isfinite(v) else med * scale for v, med in zip(shown, (med_a, med_b), strict=True)]
    noise = REL_TOL
    p = _p_value(xa, xb, noise)
    found = _hodges_lehmann(xa, xb, alpha)
    shift = 0.0 if abs(found[0]) <= noise else found[0]
    low, high = (None if v is None else 0.0 if abs(v) <= noise else v for v in found[1:])

    def rel(v: float | None) -> float | None:
        return None if v is None or not med_a else v / abs(med_a)

    effect = rel(shift)
    verdict = "no significant change"
    if _too_few(m, n, alpha):
        verdict, low, high = "too few runs", None, None
    elif (
        p < alpha and shift and low is not None and high is not None and (low > 0 or high < 0)
        and (effect is None or abs(effect) >= min_effect)
    ):  # fmt: skip
        up = shift > 0
        verdict = (words[0] if up == (direction == "higher") else words[1]) if direction else ("higher" if up else
                                                                                               "lower")  # fmt: skip
    return Judgement(m, n, shown[0], shown[1], effect, rel(low), rel(high), p, verdict)


def _median(x: Any) -> float:
    """np.median's value (the middle one, or the mean of the two middle ones) without its overhead: `compare`
    judges thousands of small samples."""
    import numpy as np

    s = np.sort(x)
    k = len(s) // 2
    with np.errstate(over="ignore"):
        return float(s[k]) if len(s) % 2 else float((s[k - 1] + s[k]) / 2)


def _p_value(xa: Any, xb: Any, noise: float) -> float:
    """Mann–Whitney U two-sided: exact (U's null distribution, as `scipy.stats.mannwhitneyu(method="exact")`) up to
    EXACT_UP_TO values a side without ties, else scipy's normal approximation with tie and continuity correction;
    1.0 when every value is one value (give or take float rounding)."""
    import numpy as np

    both = np.concatenate([xa, xb])
    if float(np.max(both) - np.min(both)) <= noise:
        return 1.0
    m, n = len(xa), len(xb)
    if _exact(m, n) and len(np.unique(both)) == m + n:
        u = int(np.count_nonzero(np.subtract.outer(xb, xa) > 0))
        cdf = _null_cdf(min(m, n), max(m, n))  # U's null distribution is the same either way round
        return min(1.0, 2 * float(cdf[min(u, m * n - u)]))
    from scipy.stats import mannwhitneyu  # its import takes a second: only for ties and large samples

    return float(mannwhitneyu(xb, xa, alternative="two-sided", method="asymptotic").pvalue)


def _hodges_lehmann(xa: Any, xb: Any, alpha: float) -> tuple[float, float | None, float | None]:
    """(the median of the differences b − a, the interval's low and high end or None)."""
    import numpy as np

    rng = np.random.default_rng(SEED)
    sa, sb = (np.asarray(x) for x in (xa, xb))
    if len(sa) > SUBSAMPLE:
        sa = rng.choice(sa, SUBSAMPLE, replace=False)
    if len(sb) > SUBSAMPLE:
        sb = rng.choice(sb, SUBSAMPLE, replace=False)
    diffs = np.sort(np.subtract.outer(sb, sa).ravel())
    m, n = len(sa), len(sb)
    k = _critical(m, n, alpha)
    shift = _median(diffs)  # sorted already: sorting again is quick
    if k < 1:
        return shift, None, None
    return shift, float(diffs[k - 1]), float(diffs[m * n - k])


def _critical(m: int, n: int, alpha: float) -> int:
    """k: the interval is the k-th smallest and k-th largest difference, P(U < k) ≤ alpha/2; 0 when none is."""
    if not _exact(m, n):
        from statistics import NormalDist

        z = NormalDist().inv_cdf(1 - alpha / 2)
        return max(0, math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
    import numpy as np

    return int(np.count_nonzero(_null_cdf(min(m, n), max(m, n)) <= alpha / 2 + 1e-12))


def _exact(m: int, n: int) -> bool:
    """Whether U's exact null distribution is taken for m and n values: up to EXACT_UP_TO a side, and beyond it
    for sides so unequal that the count of arrangements still fits (1 + 40: the normal approximation's p could
    never reach 0.05 there, the exact one can)."""
    return max(m, n) <= EXACT_UP_TO or (math.comb(m + n, min(m, n)) < 2**62 and m * n <= EXACT_PAIRS)


@lru_cache(maxsize=256)
def _null_cdf(m: int, n: int) -> Any:
    """P(U ≤ u) for u = 0..mn under the null hypothesis, without ties: the Gaussian binomial [m+n choose m]'s
    coefficients over C(m+n, m) (exact in int64 while C(m+n, m) < 2^62: `_exact`)."""
    import numpy as np

    counts = np.zeros(m * n + 1, dtype=np.int64)
    counts[0] = 1
    for i in range(1, m + 1):
        step = n + i
        if step <= m * n:
            counts[step:] -= counts[: m * n + 1 - step].copy()  # × (1 − q^(n+i))
        for j in range(i, m * n + 1):  # ÷ (1 − q^i)
            counts[j] += counts[j - i]
    return np.cumsum(counts) / math.comb(m + n, m)
