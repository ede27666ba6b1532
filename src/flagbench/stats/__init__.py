"""Statistics of the verdicts, as small modules (benchstat keeps its own so): `verdict` (is B
faster, slower or `~` the same as A; what a number measures), `ranks` (the rank tests and their
intervals, for two samples and for pairs of one round) and `layout` (the layout noise band)."""
from flagbench.stats.layout import (BEYOND, GREW, NOT_SHOWN, SHRANK, WITHIN, LayoutBand, band_shrink,  # noqa: F401
                                    band_verdict, layout_band)
from flagbench.stats.ranks import (MIN_SAMPLES_CI, in_rounds, pair_up, paired_ratio_interval, ratio_estimate_interval,  # noqa: F401
                                   ratio_interval, samples_needed, signed_rank_p)
from flagbench.stats.verdict import (CONTENDED, CPU_BOUND, EXACT_UNITS, HIGH_SPREAD, MIN_SAMPLES_QUIET,  # noqa: F401
                                     RESOLVE_AT_LEAST, Change, Metric, change, contention_differs, exact_change,
                                     metric, reach, uncontended)
