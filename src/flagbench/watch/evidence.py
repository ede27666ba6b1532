"""One commit's exact evidence against the commit before it on the branch (its first parent,
or the last one before it that built): the series' layers, made by series.py's stages.

    size       bloat-o-meter's total and grown/shrunk/added/removed functions, padding
    changed    functions whose normalised code changed (asm/: moved code is not a change)
    counts     every counted bench's exact value at the commit (one run: exact counts)
    profile    per-symbol exact counts (callgrind / the qemu plugin) of micro benches, taken
               where attribution needs them (the first commit, and where counts or the path moved)

Everything here reads the user's repository only through vcs.py (exports flagbench owns).
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from flagbench import series, spec


@dataclass
class Evidence:
    sha: str
    compared_with: str = ""            # the sha of the commit it is compared with ("" for the first)
    built: bool = False
    error: str = ""
    size: dict = field(default_factory=dict)        # total, grow, shrink, add, remove, padding
    changed: list[str] = field(default_factory=list)  # functions whose code changed (or were added/removed)
    counts: dict[str, float] = field(default_factory=dict)        # metric -> value at this commit
    base_counts: dict[str, float] = field(default_factory=dict)   # metric -> value at compared_with
    profile: dict[str, dict[str, float]] = field(default_factory=dict)   # bench -> symbol -> per iter
    timed: dict[str, dict] = field(default_factory=dict)  # metric -> {"base": [..], "head": [..], "unit"}
    timed_reason: str = ""             # why it was timed, or why not ("code identical on the measured path")
    seconds: float = 0.0

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> "Evidence":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


@dataclass
class Subject:
    """The experiment as the watch builds it: one variant at every commit, one target/compiler."""
    exp: spec.Experiment
    template: spec.Variant
    target: str
    compiler: str
    jobs: int | None = None

    @property
    def kernel(self) -> bool:
        return self.exp.kernel is not None

    @property
    def key(self) -> str:
        """What a commit's evidence depends on besides the commit: the experiment's text (not its
        sources: they are read at each commit), the variant, target and compiler."""
        text = "\0".join([Path(self.exp.path).read_text(errors="replace"), repr((self.template.cflags, self.template.optional_cflags,
                                                 self.template.defines)), self.target, self.compiler])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_rows(subject: Subject, commits) -> tuple[list[series.Row], object]:
    """A series Row per commit, built (content-cached: a commit built before is not compiled again)."""
    dexp, missing = series.commit_experiment(subject.exp, subject.template, list(commits))
    rows = [series.Row(c) for c in commits]
    for row, v in zip(rows, dexp.variants):
        if v.name in missing:
            row.error = missing[v.name]
            continue
        series._build(dexp, spec.Cell(v, subject.target, subject.compiler), row, subject.jobs, False)
    return rows, dexp


def count_rows(subject: Subject, dexp, rows: list[series.Row], notes: list[str]) -> None:
    """Every counted bench once per built row (kept in the build's directory: never counted twice).
    Only the counted metric is asked for: no timed program is linked to be thrown away."""
    cell = spec.Cell(subject.template, subject.target, subject.compiler)
    counted = tuple(replace(b, metrics=("insns",)) for b in dexp.benches if "insns" in b.metrics)
    series._count(replace(dexp, benches=counted), rows, cell, notes, False)


def compare(subject: Subject, old: series.Row, new: series.Row) -> Evidence:
    """NEW against OLD (both built and counted)."""
    d = series.delta(old, new, subject.kernel, True)
    return Evidence(new.commit.sha, old.commit.sha, True, "",
                    {"total": d.total, "grow": d.grow, "shrink": d.shrink, "add": d.add, "remove": d.remove,
                     "padding": d.padding}, list(d.functions), dict(new.counts), dict(old.counts))


def profile(subject: Subject, dexp, row: series.Row, store, workdir: Path) -> dict[str, dict[str, float]]:
    """Per-symbol exact counts of the experiment's micro benches at ROW's commit (kept in the
    store under the commit's tree: taken once)."""
    from flagbench.profile_experiment import profile_experiment

    micro = [b for b in dexp.benches if b.kind == "micro" and b.runs_on(subject.target)]
    if subject.kernel or not micro or not row.built:
        return {}
    keyed = replace(dexp, hash=f"watch:{subject.key}:{row.commit.tree}")
    got, _ = profile_experiment(keyed, [row.build], micro, store=store, workdir=workdir, perf=False,
                                say=lambda _: None)
    return {p.bench: dict(p.symbols) for p in got if p.exact}
