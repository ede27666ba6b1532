"""Bisection to an object: which object files of variant B carry its change against A.

The candidates are the objects whose bytes differ. A mix is A with B's copies of some of
them: for a C experiment the harness linked from the mix (cobjects.py), for a kernel A's
O= directory relinked by Kbuild with B's objects (kobjects.py), booted and counted. The
smallest set carrying most of the effect is found by halving (search.narrow); what it
carries is measured, not inferred.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from flagbench.bisect import search
from flagbench.errors import UserError


@dataclass
class ObjectOutcome:
    a: str
    b: str
    what: str                       # the measured quantity ("kernel insns/iter", ...)
    value_a: float
    value_b: float                  # B as built (its own link)
    candidates: list[str]
    total_objects: int
    narrowed: search.Narrowed
    seconds: float
    lines: list[str] = field(default_factory=list)
    moved: list[tuple[str, float, float, str]] = field(default_factory=list)   # symbol, A, B, object


def two_variants(exp, names) -> tuple[str, str]:
    names = list(names or [])
    if not names:
        if len(exp.variants) < 2:
            raise UserError(f"{exp.path}: object bisection compares two variants; it has one")
        return exp.variants[0].name, exp.variants[1].name
    if len(names) != 2:
        raise UserError("--objects takes two variants, A and B (or none: the first two)")
    for n in names:
        exp.variant(n)
    return names[0], names[1]


def choose_bench(exp, name: str | None, guest: bool, required: bool = True):
    """The bench that measures (by name, else the first of its kind); None when not required
    and there is none (size needs no bench)."""
    benches = [b for b in exp.benches if b.guest == guest]
    if name is not None:
        benches = [b for b in benches if b.name == name]
    if not benches and not required and name is None:
        return None
    if not benches:
        raise UserError(f"{exp.path}: no {'guest ' if guest else ''}bench{' named ' + name if name else ''} "
                        "to measure the mixes with")
    return benches[0]


def bisect_objects(exp, variants, *, metric: str, bench: str | None, share: float, workdir: Path,
                   say: Callable[[str], None], jobs: int = 2) -> ObjectOutcome:
    a, b = two_variants(exp, variants)
    start = time.monotonic()
    from flagbench import subject
    search_in = {"c": _linked_objects, "kernel": _relinked_vmlinux}[subject.of(exp).kind]
    out = search_in(exp, a, b, metric, bench, share, workdir, say, jobs)
    out.seconds = time.monotonic() - start
    return out


def _narrow(candidates, value, value_a: float, share: float, say, unit: str) -> search.Narrowed:
    def on_mix(objects: tuple[str, ...], effect: float) -> None:
        shown = ", ".join(objects[:3]) + (f" +{len(objects) - 3}" if len(objects) > 3 else "")
        say(f"mix of {len(objects)} object(s) [{shown}]: {effect:+,.2f} {unit}")
    return search.narrow(candidates, lambda s: value(s) - value_a, share=share, on_mix=on_mix)


def _linked_objects(exp, a, b, metric, bench_name, share, workdir, say, jobs) -> ObjectOutcome:
    """A C experiment: its objects of A and B mixed and linked, the bench measured on each mix."""
    from flagbench import subject
    from flagbench.bisect.cobjects import CMixer, differing

    cells = exp.cells()
    first = next(c for c in cells if c.variant.name == a)
    pair = [c for c in cells if c.target == first.target and c.compiler == first.compiler
            and c.variant.name in (a, b)]
    builds = {x.cell.variant.name: x for x in subject.of(exp).build(pair, jobs=jobs)}
    candidates, same = differing(builds[a], builds[b])
    bench = choose_bench(exp, bench_name, guest=False, required=metric != "size")
    mixer = CMixer(exp, bench, builds[a], builds[b], metric, workdir)
    say(f"{a} vs {b} ({first.target}/{first.compiler}): {len(candidates)} of "
        f"{len(candidates) + len(same)} objects differ; measuring {mixer.what}"
        + (f" of bench {bench.name}" if metric != "size" else ""))
    if not candidates:
        raise UserError(f"{a} and {b} build byte-identical objects: no object carries a change")
    value_a = mixer.value(frozenset())
    value_b = mixer.value(frozenset(candidates))
    narrowed = _narrow(candidates, mixer.value, value_a, share, say, mixer.unit)
    return ObjectOutcome(a, b, mixer.what, value_a, value_b, candidates, len(candidates) + len(same), narrowed, 0.0)


def _relinked_vmlinux(exp, a, b, metric, bench_name, share, workdir, say, jobs) -> ObjectOutcome:
    """A kernel experiment: vmlinux relinked from A's and B's objects mixed, measured on each mix."""
    from flagbench import subject
    from flagbench.bisect.cobjects import code_bytes
    from flagbench.bisect.kobjects import KernelMixer, differing

    cells = [c for c in exp.cells() if c.variant.name in (a, b)]
    cells = [c for c in cells if (c.target, c.compiler) == (cells[0].target, cells[0].compiler)]
    commits = [n for n in (a, b) if exp.variant(n).commit is not None]
    if commits:   # a commit's usual build keeps no objects: each gets a checkout and O= of its own
        say(f"{', '.join(commits)}: a commit; built in a checkout and O= directory of its own (kept at it), "
            "so A's objects can be relinked with B's")
    built = {k.cell.variant.name: k for k in subject.of(exp).kernels(cells, jobs=jobs, progress=True, boot=True,
                                                                     keep_objects=bool(commits))}
    ka, kb = built[a], built[b]
    if not (ka.ok and kb.ok):
        raise UserError(f"a kernel did not build: {ka.error or kb.error}")
    candidates, total = differing(ka, kb)
    say(f"{a} vs {b}: {len(candidates)} of the {total} objects vmlinux is linked from differ")
    if not candidates:
        raise UserError(f"{a} and {b} link byte-identical objects: no object carries a change")
    mixer = KernelMixer(ka, kb, candidates, workdir / "mixes", jobs=jobs, say=say)
    if metric == "size":
        what, unit = "code bytes of vmlinux", "bytes"

        def value(chosen: frozenset[str]) -> float:
            return float(code_bytes([mixer.vmlinux(chosen)]))
        value_b = float(code_bytes([kb.vmlinux]))
        meter = None
    elif metric == "insns":
        meter = GuestMeter(exp, choose_bench(exp, bench_name, guest=True), ka.cell.target, workdir / "boots")
        what, unit = f"kernel insns/iter of {meter.row.tag}", "insns"
        results: dict[frozenset, object] = {}

        def value(chosen: frozenset[str]) -> float:
            vmlinux = mixer.vmlinux(chosen)
            results[chosen] = meter.measure(vmlinux, vmlinux.with_name("System.map"))
            return results[chosen].per_iter(results[chosen].kernel)
        rb = meter.measure(kb.vmlinux, kb.system_map)
        value_b = rb.per_iter(rb.kernel)
    else:
        raise UserError(f"object bisection measures exact counts (insns) or size, not {metric}")
    value_a = value(frozenset())
    narrowed = _narrow(candidates, value, value_a, share, say, unit)
    out = ObjectOutcome(a, b, what, value_a, value_b, candidates, total, narrowed, 0.0)
    out.lines.append(f"relinks: {mixer.relinks}, {mixer.seconds:.0f} s of copying and linking")
    if meter is not None:
        out.moved = moved_symbols(results[frozenset()], rb, ka.dir, narrowed.objects)
    return out


class GuestMeter:
    """Boots a vmlinux with the bench's guest rows and reads one row's exact counts."""

    def __init__(self, exp, bench, target: str, workdir: Path):
        from flagbench.run.guest import boot, guest
        rows, programs = guest.plan_rows([bench], Path(exp.root))
        self.row, self.rows = rows[0], rows
        self.t = boot.target(target)
        if self.t.why_not:
            raise UserError(f"guest benches on {target}: {self.t.why_not}")
        self.workdir = workdir
        self.initrd = guest.make_initramfs(self.t, rows, programs, workdir)
        self.settings = boot.BootSettings(timeout=guest.BOOT_SECONDS + sum(r.budget for r in rows))
        self.boots = 0

    def measure(self, vmlinux: Path, system_map: Path, append: tuple[str, ...] = ()):
        """APPEND: extra kernel command-line words (an A/A boot's ignored one)."""
        from dataclasses import replace

        from flagbench.run.guest import boot, guest
        self.boots += 1
        settings = replace(self.settings, append=(*self.settings.append, *append)) if append else self.settings
        r = boot.boot(self.t, vmlinux, self.initrd, workdir=self.workdir / f"boot-{self.boots}",
                      settings=settings, system_map=system_map)
        row = guest.parse_console(r.console, r.regions, self.rows)[self.row.tag]
        if row.failure or not row.iterations:
            from flagbench.errors import StepFailed
            raise StepFailed(f"booting {vmlinux}: {row.failure or 'no iterations'}"
                            + ("" if r.ok else f" ({r.reason})"))
        return row


def moved_symbols(ra, rb, odir: Path, objects: list[str], top: int = 8) -> list[tuple[str, float, float, str]]:
    """The kernel symbols whose instructions per iteration moved most from A to B, with the
    found object (a path in ODIR) that defines each ("" when none of them does)."""
    from flagbench import elf
    defined = {}
    for o in objects:
        for name, letter, _ in elf.sized_symbols(odir / o):
            if letter in "tTwW":
                defined.setdefault(name, o)
    names = set(ra.profile) | set(rb.profile)
    rows = [(s, ra.per_iter(ra.profile.get(s, 0)), rb.per_iter(rb.profile.get(s, 0))) for s in names]
    rows.sort(key=lambda r: -abs(r[2] - r[1]))
    return [(s, x, y, defined.get(s, "")) for s, x, y in rows[:top] if y != x]


def summary(out: ObjectOutcome) -> list[str]:
    """The result, in lines of at most WIDTH columns (it goes to mail)."""
    from flagbench.bisect.commits import WIDTH, _fit, _wrapped
    n = out.narrowed
    full = out.value_b - out.value_a
    lines = [_fit(f"{out.what}: {out.a} {out.value_a:,.2f}, {out.b} {out.value_b:,.2f} ({full:+,.2f})"),
             _fit(f"all {len(out.candidates)} differing objects of {out.b} in {out.a}: {n.full:+,.2f}")]
    tail = (f"carr{'ies' if len(n.objects) == 1 else 'y'} {n.share * 100:.0f} % of the {n.full:+,.2f} "
            f"({n.effect:+,.2f}); {n.mixes} mixes measured, {out.seconds:.0f} s")
    found = _wrapped("", n.objects, WIDTH)
    if len(found[-1]) + 1 + len(tail) <= WIDTH:
        found[-1] += " " + tail
    else:
        found.append("  " + tail)
    lines += found
    if out.moved:
        lines.append(f"symbols whose {out.what} moved most, A -> B, and the found object defining each:")
    for s, x, y, where in out.moved:
        lines.append(_fit(f"  {s:32} {x:12,.1f} -> {y:12,.1f} ({y - x:+,.1f})  {where or '-'}"))
    return [_fit(line) for line in lines + out.lines]
