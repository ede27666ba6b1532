"""One experiment's page, whatever it builds: a summary, each pair of builds (size, asm, and what
the kind of experiment adds: a kernel's paste-under-the-patch summary and changed objects), the
benchmark tables, the profiles. `flagbench demo` puts one per case under one summary;
`flagbench report EXPERIMENT` writes one alone. The facts are gathered by the CLI (it builds and
runs); this module only lays them out, so both pages are the same page.
"""
from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from flagbench.report.doc import Block, Heading, Link, Para, note_blocks
from flagbench.report.sections import SizeFacts, asm_blocks, pair_anchor, size_blocks, size_summary


@dataclass
class Pair:
    """The baseline against one other variant on one target and compiler."""
    variant: str
    target: str
    compiler: str
    old_label: str
    new_label: str
    size: SizeFacts
    old_objects: list
    new_objects: list
    before: list[Block] = field(default_factory=list)   # e.g. a kernel's summary, above the size table
    after: list[Block] = field(default_factory=list)    # e.g. a kernel's changed objects, below it
    what: str = ""                                      # "vmlinux " for a kernel pair


@dataclass
class Case:
    name: str
    description: str
    baseline: str
    pairs: list[Pair] = field(default_factory=list)
    tables: list = field(default_factory=list)          # report.tables.Table
    causes: dict = field(default_factory=dict)          # the tables' verdicts' causes (causes.run_causes)
    failures: list[dict] = field(default_factory=list)  # failed cells, as the store has them
    profiles: list[Block] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)      # built how, from which tree, which toolchains
    extra: list[Block] = field(default_factory=list)    # what could not be done, and why
    show: tuple[str, ...] = ()


def case_blocks(case: Case) -> tuple[list[Block], list[Block]]:
    """(the case's section, its lines for the overall summary)."""
    from flagbench.report import blocks, failure_blocks
    from flagbench.report.summary import case_summary

    details, sizes = [], {}
    for p in case.pairs:
        key = (p.variant, p.target, p.compiler)
        size_anchor = pair_anchor(case.name, "size", *key)
        sizes[key] = (size_summary(p.size), size_anchor)
        details += [Heading(3, f"{p.new_label} vs {p.old_label}", pair_anchor(case.name, "pair", *key)), *p.before]
        details += size_blocks(p.size, anchor=size_anchor, label=f"{p.what}{p.new_label} vs {p.old_label}")
        details += p.after
        details += asm_blocks(p.old_objects, p.new_objects, old_label=p.old_label, new_label=p.new_label,
                              show=case.show, anchor=pair_anchor(case.name, "asm", *key))
    summary = case_summary(case.tables, prefix=case.name, baseline=case.baseline, sizes=sizes)
    section: list[Block] = [Heading(2, case.name, case.name), Para([case.description]), summary]
    section += note_blocks([unpath(n) for n in case.notes], [unpath(f) for f in case.facts])
    section += details + case.extra
    if case.tables or case.failures:
        section += [Heading(3, f"{case.name}: benchmarks", f"{case.name}-benchmarks")]
        section += blocks(case.tables, prefix=case.name, figures=True, causes=case.causes)
        section += failure_blocks([{**f, "reason": unpath(f.get("reason") or "")} for f in case.failures])
    if case.profiles:
        section += [Heading(3, f"{case.name}: where the instructions and the time go", f"{case.name}-profiles")]
        section += case.profiles
    return section, [Para([Link(case.name, case.name), f": {case.description}"]), summary]


def unpath(text: str) -> str:
    """Text for a report, without the absolute temporary and cache paths a run worked in
    (they differ every run and say nothing to a reader): each becomes its last part.

    >>> unpath(f"{tempfile.gettempdir()}/flagbench-run-x1y2/wis/default/page_fault: exit status 1")
    '…/page_fault: exit status 1'
    """
    roots = {tempfile.gettempdir(), str(Path.home() / ".cache")}
    try:
        from flagbench.build import cache_dir
        roots.add(str(cache_dir()))
    except Exception:   # the report must not fail for want of a cache root
        pass
    for root in sorted(roots, key=len, reverse=True):
        text = re.sub(re.escape(root.rstrip("/")) + r"/(?:[^\s:'\"]*/)?([^\s/:'\"]+)", r"…/\1", text)
    return text
