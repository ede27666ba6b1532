"""Verdicts on samples drawn from known distributions (seeded, so the tests are repeatable)."""
import re

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from flagbench import stats
from flagbench.stats import metric, ratio_interval


def lognormal(rng, n, median, sigma=0.03):
    return list(median * np.exp(rng.normal(0, sigma, n)))


def test_known_slowdown_is_slower_and_interval_covers_true_ratio():
    rng = np.random.default_rng(1)
    old, new = lognormal(rng, 15, 100.0), lognormal(rng, 15, 120.0)
    c = stats.change(old, new, metric="ns_per_iter")
    assert c.verdict == "slower"
    assert c.ci_low < 1.2 < c.ci_high and c.ci_low > 1.0
    assert c.p_value < 0.001 and c.n_old == c.n_new == 15
    assert c.warnings == ()
    assert stats.change(new, old).verdict == "faster"


def test_throughput_direction_is_reversed():
    rng = np.random.default_rng(2)
    old, new = lognormal(rng, 12, 500.0), lognormal(rng, 12, 600.0)   # MB/s went up
    assert stats.change(old, new, higher_is_better=True).verdict == "faster"
    assert stats.change(old, new, higher_is_better=metric("MB/s", "MB/s").higher_is_better).verdict == "faster"
    assert stats.change(old, new).verdict == "slower"   # as a time it would be worse


def test_identical_distributions_are_mostly_same():
    rng = np.random.default_rng(3)
    verdicts = [stats.change(lognormal(rng, 10, 50.0, 0.05), lognormal(rng, 10, 50.0, 0.05)).verdict
                for _ in range(200)]
    false_positives = sum(v != "~" for v in verdicts)
    assert false_positives <= 200 * 0.05 + 6     # alpha = 0.05, with binomial slack


def test_interval_agrees_with_the_u_test():
    """The Moses interval is the inversion of the U test: it excludes 1 exactly when p < alpha."""
    rng = np.random.default_rng(4)
    for _ in range(200):
        old = lognormal(rng, 8, 10.0, 0.05)
        new = lognormal(rng, 8, 10.0 * rng.uniform(0.95, 1.05), 0.05)
        lo, hi = ratio_interval(old, new)
        p = mannwhitneyu(old, new, alternative="two-sided", method="exact").pvalue
        assert (p < 0.05) == (not lo <= 1.0 <= hi)


def test_few_samples_give_no_interval_and_a_warning():
    c = stats.change([10, 11, 12, 10, 11], [20, 21, 22, 20, 21])
    assert c.ci_low is None and c.ci_high is None and c.p_value is None
    assert c.verdict == "~"
    assert any("too few samples" in w for w in c.warnings)
    assert c.ratio == pytest.approx(21 / 11)
    mid = stats.change([10, 11, 12, 10, 11, 10], [20, 21, 22, 20, 21, 20])
    assert mid.ci_low is not None and mid.verdict == "slower"
    assert any("too few samples (n=6" in w for w in mid.warnings)


def test_high_spread_is_warned():
    c = stats.change([10, 20, 10, 20, 10, 20, 15, 15, 12], [10, 10.1, 10, 10.1, 10, 10.1, 10, 10, 10])
    assert any("high spread in old" in w for w in c.warnings)
    assert not any("in new" in w for w in c.warnings)


def test_constant_samples_and_non_positive_values():
    assert stats.change([5.0] * 9, [5.0] * 9).verdict == "~"
    c = stats.change([0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6])
    assert c.ci_low is None and c.verdict == "~"
    assert any("<= 0" in w for w in c.warnings)
    with pytest.raises(ValueError):
        stats.change([], [1.0])


def test_exact_counts():
    c = stats.exact_change(1_000_000, 1_170_000, metric="insns")
    assert c.verdict == "exact" and c.ratio == pytest.approx(1.17) and c.relative == pytest.approx(0.17)
    assert stats.exact_change(0, 0).ratio == 1.0
    assert metric("insns", "insns").exact and not metric("MB/s", "MB/s").exact
    # what a booted guest counts (run/guest/guest.py) is exact too: work, never a timing verdict
    assert metric("kernel_insns_per_iter", "insns").kind == "work" == metric("user_insns_per_iter", "insns").kind


# -- issue 11: a number outside its own interval -------------------------------------------------

import os  # noqa: E402
import tempfile  # noqa: E402

# hypothesis keeps caches in .hypothesis/ of the working directory: not in the checkout
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "flagbench-hypothesis"))
from hypothesis import given, settings, strategies as st  # noqa: E402

from flagbench.report.cells import fmt_change  # noqa: E402

_values = st.lists(st.floats(min_value=0.01, max_value=1e6, allow_nan=False, allow_infinity=False),
                   min_size=6, max_size=25)


@settings(max_examples=300, deadline=None, database=None)   # no .hypothesis/ in the checkout
@given(old=_values, new=_values)
def test_every_printed_estimate_lies_inside_its_printed_interval(old, new):
    """The change printed beside an interval is the estimate that interval belongs to (Hodges-Lehmann
    for the Moses interval): inside it before rounding and after."""
    c = stats.change(old, new)
    assert c.ci_low is not None and c.ci_low <= c.estimate <= c.ci_high
    text = fmt_change(c)
    est, low, high = (float(x) for x in re.match(r"~? ?([+-][\d.]+) % \[([+-][\d.]+), ([+-][\d.]+)\]", text).groups())
    assert low <= est <= high, text


def test_the_estimate_is_the_median_pairwise_ratio_not_the_ratio_of_medians():
    old, new = [10, 10, 10, 20, 20, 20, 20], [5, 5, 5, 5, 10, 10, 10]
    c = stats.change(old, new)
    pairwise = sorted(b / a for a in old for b in new)
    assert c.estimate == pytest.approx(pairwise[len(pairwise) // 2])
    assert c.ratio == pytest.approx(5 / 20)     # the medians' ratio is still there, for the tables


def test_bimodal_samples_whose_ratio_of_medians_lies_outside_the_interval():
    """Two modes in different proportions: the medians' ratio (-65.1 %) lies far outside the Moses
    interval (about -51 % .. -40 %), as in issue 11's `-49.0 % [-50.1, -49.2]`; what is printed must not."""
    old = [14.676, 9.972, 9.969, 14.758, 10.039, 14.755, 14.594, 10.015, 10.009, 10.091, 14.591, 14.731, 14.45,
           14.656, 10.031]
    new = [8.751, 4.976, 8.82, 5.04, 4.989, 4.978, 8.761, 8.783, 5.037, 5.006, 4.98, 4.991, 8.749, 8.796, 8.768]
    c = stats.change(old, new)
    assert not c.ci_low <= c.ratio <= c.ci_high                       # the old print's number
    assert c.ci_low <= c.estimate <= c.ci_high
    est, low, high = (float(x) for x in re.match(r"~? ?([+-][\d.]+) % \[([+-][\d.]+), ([+-][\d.]+)\]",
                                                 fmt_change(c)).groups())
    assert low <= est <= high


# -- verdicts under contention -------------------------------------------------------------------

def test_contended_samples_are_set_aside_when_enough_remain():
    """Samples whose programs got a small share of a CPU ran beside something else; without them
    the two sides are the same, with them a burst of load on one side looks like a slowdown."""
    rng = np.random.default_rng(11)
    old, new = lognormal(rng, 16, 100.0, 0.01), lognormal(rng, 16, 100.0, 0.01)
    shares_old, shares_new = [1.0] * 16, [1.0] * 16
    for i in range(10):                     # ten of B's runs took twice as long, at half a CPU
        new[i] *= 2.0
        shares_new[i] = 0.5
    assert stats.change(old, new).verdict == "slower"
    c = stats.change(old, new, shares_old=shares_old, shares_new=shares_new)
    assert c.verdict == "~" and c.n_new == 6 and c.n_old == 16
    assert any("10 of 32 samples ran contended" in w and "set aside" in w for w in c.warnings)


def test_different_contention_on_each_side_gives_no_verdict():
    """B ran at a lower CPU share than A throughout: its slowness may be the machine's."""
    rng = np.random.default_rng(12)
    old, new = lognormal(rng, 8, 100.0, 0.01), lognormal(rng, 8, 130.0, 0.01)
    c = stats.change(old, new, shares_old=[1.0] * 8, shares_new=[0.6] * 8)
    assert c.verdict == "~" and c.ci_low is not None and c.needed is None
    assert any("different contention" in w for w in c.warnings)
    # the same contention on both sides (bursts that hit A and B alike) leaves the change to be called
    alike = [1.0, 0.5] * 4
    assert stats.change(old, new, shares_old=alike, shares_new=alike[::-1]).verdict == "slower"


def test_unknown_shares_change_nothing():
    rng = np.random.default_rng(13)
    old, new = lognormal(rng, 10, 100.0), lognormal(rng, 10, 120.0)
    assert stats.change(old, new, shares_old=[None] * 10, shares_new=[1.0] * 10) == stats.change(old, new)


def test_aa_control_reach_is_the_smallest_change_called():
    rng = np.random.default_rng(14)
    base, again = lognormal(rng, 12, 100.0, 0.05), lognormal(rng, 12, 100.0, 0.05)
    control = stats.change(base, again)
    reach = stats.reach(control)
    assert reach == pytest.approx(max(control.ci_high, 1 / control.ci_low) - 1) and reach > 0
    quiet = lognormal(rng, 12, 100.0, 0.002)
    small = lognormal(rng, 12, 100.0 * (1 + reach / 2), 0.002)   # real, and smaller than the control's reach
    assert stats.change(quiet, small).verdict == "slower"
    c = stats.change(quiet, small, floor=reach)
    assert c.verdict == "~" and any("A/A control's reach" in w for w in c.warnings)
    big = lognormal(rng, 12, 100.0 * (1 + 3 * reach), 0.002)
    assert stats.change(quiet, big, floor=reach).verdict == "slower"


def test_an_undecided_interval_says_how_many_samples_would_decide_it():
    rng = np.random.default_rng(15)
    old, new = lognormal(rng, 10, 100.0, 0.2), lognormal(rng, 10, 103.0, 0.2)
    c = stats.change(old, new)
    assert c.verdict == "~" and c.needed > 10 and c.resolve >= stats.RESOLVE_AT_LEAST
    # at that many samples the interval's half-width (in log space, shrinking as 1/sqrt(n)) is the change
    half = (np.log(c.ci_high) - np.log(c.ci_low)) / 2 * np.sqrt(10 / c.needed)
    assert half <= np.log1p(c.resolve) + 1e-9
    assert stats.change(old, [x * 2 for x in old]).needed is None     # decided: no advice
    tight = lognormal(rng, 40, 100.0, 0.01)
    same = stats.change(tight, [x * 1.001 for x in tight])             # ~, but narrower than +-2 %
    assert same.verdict == "~" and same.ci_high / same.ci_low < 1.02 ** 2 and same.needed is None


def test_band_shrink_needs_the_spreads_to_differ():
    wide = stats.LayoutBand(12, 0.88, 1.13, tuple(1 + 0.02 * k for k in range(-6, 7) if k))
    narrow = stats.LayoutBand(12, 0.999, 1.001, tuple(1 + 0.0001 * k for k in range(-6, 7) if k))
    verdict, p = stats.band_shrink(wide, narrow)
    assert verdict == stats.SHRANK and p < 0.05
    assert stats.band_shrink(narrow, wide)[0] == stats.GREW
    assert stats.band_shrink(wide, wide)[0] == stats.NOT_SHOWN


# -- paired rounds ---------------------------------------------------------------------------

def test_signed_rank_p_is_scipys_exact_wilcoxon():
    from scipy.stats import wilcoxon
    rng = np.random.default_rng(11)
    for n in (6, 7, 10, 25, 60, 90):
        d = rng.normal(0.02, 0.05, n)
        assert stats.signed_rank_p(d) == pytest.approx(wilcoxon(d, method="exact").pvalue, rel=1e-9)


def test_paired_interval_inverts_the_signed_rank_test():
    """The interval excludes 1 exactly when the test rejects at its alpha (no ties in these data)."""
    rng = np.random.default_rng(5)
    agree = 0
    for _ in range(300):
        n = int(rng.integers(6, 30))
        old = rng.lognormal(0, 0.1, n)
        new = old * rng.lognormal(rng.choice([0.0, 0.03]), 0.05, n)
        est, lo, hi = stats.paired_ratio_interval(old, new)
        p = stats.signed_rank_p(np.log(new) - np.log(old))
        assert lo <= est <= hi
        agree += (p < 0.05) == (not lo <= 1 <= hi)
    assert agree == 300


def test_a_burst_longer_than_a_round_cancels_in_pairs_and_not_unpaired():
    """Load that moves whole rounds (both members of a pair) hides a 2 % slowdown from the unpaired
    test and not from the paired one; the paired interval holds the true ratio."""
    rng = np.random.default_rng(3)
    load = np.repeat(rng.lognormal(0, 0.2, 10), 2)           # bursts of two rounds
    old = 100 * load * rng.lognormal(0, 0.004, 20)
    new = 102 * load * rng.lognormal(0, 0.004, 20)
    unpaired, paired = stats.change(old, new), stats.change(old, new, paired=True)
    assert unpaired.verdict == "~"
    assert paired.verdict == "slower" and paired.paired and paired.ci_low < 1.02 < paired.ci_high


def test_paired_aa_is_called_at_most_alpha_however_the_bursts_fall():
    """The randomisation argument: the order within each round is a fair coin, so under A/A each
    log-ratio's sign is a fair coin whatever the load did. Simulated with bursts that always hit
    the second slot of a round (the worst case for a fixed order): false positives stay <= alpha."""
    rng = np.random.default_rng(8)
    called = 0
    trials = 400
    for _ in range(trials):
        slots = rng.lognormal(0, 0.05, (12, 2)) * np.array([1.0, 1.3])   # the second run is slowed
        flip = rng.random(12) < 0.5                                     # which variant ran second
        a = np.where(flip, slots[:, 1], slots[:, 0])
        b = np.where(flip, slots[:, 0], slots[:, 1])
        called += stats.change(a, b, paired=True).verdict != "~"
    assert called / trials <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / trials)


def test_pairs_need_unique_rounds_on_both_sides():
    rounds = [f"s.{i}" for i in range(8)]
    assert stats.pair_up(rounds, rounds[::-1]) == [(i, 7 - i) for i in range(8)]
    assert stats.pair_up(rounds, rounds[:5]) is None                  # too few pairs for an interval
    assert stats.pair_up(rounds, [None] * 8) is None                  # samples from before rounds were kept
    with pytest.raises(ValueError):
        stats.change([1, 2], [1, 2, 3], paired=True)
