"""Where one stored sample came from, as one typed, checked record (pyperf's Run idea): the run
engine builds a `SampleRecord` for every value it stores, whatever the place (this machine, an
ssh host, a kernel booted by kexec), and the record refuses a field of the wrong type and
metadata that disagrees (the cell says target x86_64, the place says aarch64), instead of one
dict silently overwriting the other.

It is stored flat, as JSON (store.py `samples.provenance`), with the same keys flagbench always
wrote, so readers and databases from before keep working:

    experiment_hash, variant_column, target, compiler, executor, job ("sample" or "count"),
    sample (1, 2, ... for samples, 0 for counts), warmup_dropped, time, loadavg,
    round (samples), contention (samples), and beside them
    the cell's own (flags, tool versions, function, host, ...; a series' or bisection's `commit`,
    a CommitRecord), the place's (host_load, boot, kernel, identity, ...) and the job's
    (iterations, ns, ...).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, fields, replace
from typing import Any

JOBS = ("sample", "count")


class ProvenanceError(ValueError):
    """A sample's provenance that cannot be right: a wrong type, or two sources that disagree."""


@dataclass(frozen=True)
class SampleRecord:
    """The provenance of one stored value.

    >>> r = SampleRecord("h", "A", "x86_64", "gcc", "native", "sample", 3, 1, 1.5, round="s.1")
    >>> r.to_json()["sample"], r.with_contention({"cpu_share": 0.98}).to_json()["contention"]
    (3, {'cpu_share': 0.98})
    >>> SampleRecord("h", "A", "x86_64", "gcc", "native", "sample", 3, 1, 1.5, cell={"target": "arm"})
    Traceback (most recent call last):
    flagbench.provenance.ProvenanceError: sample provenance: target is 'x86_64' in the record and 'arm' in the cell's
    """
    experiment_hash: str
    variant_column: str
    target: str
    compiler: str
    executor: str
    job: str                       # "sample" (timed, numbered) or "count" (exact, once)
    sample: int                    # the timed sample's number in its cell (1, 2, ...); 0 for a count
    warmup_dropped: int
    time: float                    # when it was taken (seconds since the epoch)
    round: str | None = None       # the round it ran in: samples of one round are compared as a pair
    loadavg: tuple[float, ...] | None = None
    contention: dict | None = None     # noise.Contention of a timed sample
    cell: dict = field(default_factory=dict)    # the cell's own: flags, tool versions, function, ...
    place: dict = field(default_factory=dict)   # the place's: a host's load, the boot it ran in
    facts: dict = field(default_factory=dict)   # the job's, beside its value: iterations, ns, ...

    def __post_init__(self):
        for name in ("experiment_hash", "variant_column", "target", "compiler", "executor"):
            _check(isinstance(getattr(self, name), str), name, "text", getattr(self, name))
        _check(self.job in JOBS, "job", " or ".join(JOBS), self.job)
        for name in ("sample", "warmup_dropped"):
            value = getattr(self, name)
            _check(isinstance(value, int) and not isinstance(value, bool) and value >= 0, name,
                   "a whole number >= 0", value)
        _check((self.sample >= 1) == (self.job == "sample"), "sample", "numbered from 1 for a sample, 0 for a count",
               self.sample)
        _check(isinstance(self.time, (int, float)) and math.isfinite(self.time), "time", "seconds", self.time)
        _check(self.round is None or (isinstance(self.round, str) and self.job == "sample"), "round",
               "text, of a timed sample", self.round)
        _check(self.loadavg is None or all(isinstance(x, (int, float)) for x in self.loadavg), "loadavg",
               "numbers", self.loadavg)
        for name in ("contention", "cell", "place", "facts"):
            value = getattr(self, name)
            _check(value is None if name == "contention" and value is None else isinstance(value, dict), name,
                   "a mapping", value)
            if value:
                _check(all(isinstance(k, str) for k in value), name, "text keys", list(value))
                try:
                    json.dumps(value)
                except (TypeError, ValueError) as e:
                    raise ProvenanceError(f"sample provenance: {name} cannot be stored: {e}") from None
        if "commit" in self.cell:   # a series' or bisection's sample: the commit it measured, checked
            CommitRecord.from_json(self.cell["commit"])
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("cell", "place", "facts")}
        seen: dict[str, tuple[str, Any]] = {k: ("the record", v) for k, v in own.items()}
        for source, extra in (("the cell's", self.cell), ("the place's", self.place), ("the job's", self.facts)):
            for key, value in extra.items():
                if key in seen and seen[key][1] != value:
                    raise ProvenanceError(f"sample provenance: {key} is {seen[key][1]!r} in {seen[key][0]} "
                                          f"and {value!r} in {source}")
                seen.setdefault(key, (source, value))

    def with_contention(self, contention: dict) -> "SampleRecord":
        return replace(self, contention=dict(contention))

    def to_json(self) -> dict:
        """The flat JSON object the store keeps (the keys readers have always read)."""
        out = {**self.cell, **self.place, **self.facts}
        for f in fields(self):
            if f.name in ("cell", "place", "facts"):
                continue
            value = getattr(self, f.name)
            if value is None and f.name in ("round", "contention"):
                continue
            out[f.name] = list(value) if f.name == "loadavg" and value is not None else value
        return out


def _check(ok: bool, name: str, what: str, value) -> None:
    if not ok:
        raise ProvenanceError(f"sample provenance: {name} must be {what}, not {value!r}")


@dataclass(frozen=True)
class CommitRecord:
    """A commit a series or bisection measured, as its runs and samples store it: checked, so a
    sample never names a commit by something that is not one.

    >>> c = CommitRecord("a" * 40, "b" * 40, "lib: fix", ("c" * 40,))
    >>> c.short, CommitRecord.from_json(c.to_json()) == c
    ('aaaaaaaaaaaa', True)
    >>> CommitRecord("HEAD", "b" * 40, "x")
    Traceback (most recent call last):
    flagbench.provenance.ProvenanceError: commit provenance: sha must be 40 hex digits, not 'HEAD'
    """
    sha: str
    tree: str
    subject: str
    parents: tuple[str, ...] = ()      # first parent first; () for a root commit

    def __post_init__(self):
        for name in ("sha", "tree"):
            value = getattr(self, name)
            _check_commit(_hex40(value), name, "40 hex digits", value)
        _check_commit(isinstance(self.subject, str), "subject", "text", self.subject)
        _check_commit(isinstance(self.parents, tuple) and all(_hex40(p) for p in self.parents), "parents",
                      "a list of 40-hex shas", self.parents)

    @property
    def short(self) -> str:
        return self.sha[:12]

    @property
    def first_parent(self) -> str | None:
        return self.parents[0] if self.parents else None

    @property
    def merge(self) -> bool:
        return len(self.parents) > 1

    def to_json(self) -> dict:
        return {"sha": self.sha, "tree": self.tree, "subject": self.subject, "parents": list(self.parents)}

    @classmethod
    def from_json(cls, data) -> "CommitRecord":
        if not isinstance(data, dict):
            raise ProvenanceError(f"commit provenance must be a mapping, not {data!r}"[:120])
        parents = data.get("parents", [])
        return cls(data.get("sha"), data.get("tree"), data.get("subject"),
                   tuple(parents) if isinstance(parents, list) else parents)

    @classmethod
    def of(cls, commit, parents=()) -> "CommitRecord":
        """From a vcs.Commit and its parents' shas."""
        return cls(commit.sha, commit.tree, commit.subject, tuple(parents))


def _hex40(value) -> bool:
    return isinstance(value, str) and len(value) == 40 and all(c in "0123456789abcdef" for c in value)


def _check_commit(ok: bool, name: str, what: str, value) -> None:
    if not ok:
        raise ProvenanceError(f"commit provenance: {name} must be {what}, not {value!r}")
