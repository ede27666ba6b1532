"""A cause on every verdict of a run: attribution.py put together with what a run stores.

Run side (pipeline.py, before the cells run): `changed_by_cell` compares each variant's build
with the baseline's of the same target and compiler (asm/compare.py: objects of a C build,
vmlinux of a kernel) and returns the names of the functions whose code changed, kept in the
run's provenance under CHANGED_KEY ("variant/target/compiler" -> names).

Report side (report/__init__.py): `run_causes` reads, per bench, target, compiler, variant and
row, the exact count (insns_per_iter of a micro bench, kernel_insns_per_iter of a guest bench),
the per-symbol counts (a micro bench's stored exact profile, `metrics = [..., "profile"]`; a
guest bench's every symbol, kept with its counted cell, else its "kernel profile" rows), the A/A
floor (a guest's baseline booted twice: `aa_noise_floor_kernel_per_iter` in its samples'
provenance) and the changed functions, and
makes each row's Attribution and Cause; a timed row gets the cause of its counts with its place
against the layout band. Without per-symbol counts a change is still attributed when no
function changed code (the whole delta is elsewhere); else its cause is unknown.
"""
from __future__ import annotations

from dataclasses import dataclass

from flagbench.attribution import (LINE_WIDTH, Attribution, Cause, attribute, attribution_lines, cause,
                                   cause_line)

CHANGED_KEY = "changed_functions"
MEASURED_KEY = "measured_functions"         # bench -> the function a micro bench times: on its path by definition
FLOOR_KEY = "aa_noise_floor_kernel_per_iter"
PROFILE_KEY = "kernel_profile_per_iter"     # a guest's counted cell: every symbol it ran (run/guest/guest.py)
TOTALS = ("insns_per_iter", "kernel_insns_per_iter")   # the count a cause is about, by bench kind
PROFILE_SUFFIX = " kernel profile"
SYMBOL_PREFIX = "insns_per_iter:"
ROWS_SHOWN = 4


def measured_functions(benches) -> dict[str, str]:
    """bench -> the function a micro bench calls in its loop: whatever else it reaches, it runs that."""
    return {b.name: b.function for b in benches if isinstance(getattr(b, "function", None), str)}


def cell_key(variant: str, target: str, compiler: str) -> str:
    return f"{variant}/{target}/{compiler}"


def changed_by_cell(builds, order, say=None) -> dict[str, list[str]]:
    """Functions whose code changed, per non-baseline build (C builds: their objects; kernel
    builds: their vmlinux), against the baseline (the first of `order`) of its target and compiler.
    A pair that cannot be compared is left out (its causes say unknown) and said through `say`."""
    from flagbench.asm.compare import compare_files, compare_object_sets
    from flagbench.attribution import changed_functions
    from flagbench.errors import UserError

    groups: dict[tuple[str, str], dict[str, object]] = {}
    for b in builds:
        if getattr(b, "ok", True):
            groups.setdefault((b.cell.target, b.cell.compiler), {})[b.cell.variant.name] = b
    out: dict[str, list[str]] = {}
    for (target, compiler), by_variant in groups.items():
        base = next((v for v in order if v in by_variant), None)
        if base is None:
            continue
        a = by_variant[base]
        for variant, b in by_variant.items():
            if variant == base:
                continue
            try:
                if hasattr(a, "vmlinux"):
                    c = compare_files(a.vmlinux, b.vmlinux, rank=False, mix_each=False)
                elif not a.objects and not b.objects:   # nothing built from sources: no code to change
                    out[cell_key(variant, target, compiler)] = []
                    continue
                elif not a.objects or not b.objects:
                    continue
                else:
                    c = compare_object_sets(list(a.objects), list(b.objects), rank=False)
            except (UserError, OSError, ValueError, RuntimeError) as e:   # the run goes on: causes unknown
                if say:
                    say(f"{variant} {target}/{compiler}: asm not compared ({e}): its causes are unknown")
                continue
            out[cell_key(variant, target, compiler)] = list(changed_functions(c))
    return out


def _changed(run: dict | None) -> dict[str, list[str]]:
    found = ((run or {}).get("provenance") or {}).get(CHANGED_KEY)
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items()
            if isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)}


@dataclass(frozen=True)
class RowCause:
    """One compared variant of one row of a table: its attribution (None: unknown) and cause."""
    variant: str
    params: dict
    attribution: Attribution | None
    cause: Cause
    floor_note: str = ""        # how the A/A floor was measured, when it was
    band: str | None = None     # a timed row's place against the layout band (stats.layout)
    layout_check: str = ""      # the layout check's answer (every function 64-byte aligned), when it ran
    better: bool = False        # a timed row's change is an improvement

    def to_json(self) -> dict:
        return {"variant": self.variant, "params": self.params, "cause": self.cause.to_json(),
                "attribution": None if self.attribution is None else self.attribution.to_json(),
                "floor": self.floor_note or None, "layout_check": self.layout_check or None}


def _cell_facts(samples: list[dict]) -> tuple[dict[tuple, float], dict[tuple, dict[str, float]]]:
    """What guest cells kept in their provenance: the A/A floor of a baseline's row, by (bench,
    target, compiler, params); every symbol's count per iteration, by (bench, target, compiler,
    variant, params)."""
    floors, profiles = {}, {}
    for s in samples:
        cell = s.get("provenance")   # flat: the cell's keys beside the record's (provenance.SampleRecord)
        if not isinstance(cell, dict):
            continue
        params = _params(s.get("params") or {})
        value = cell.get(FLOOR_KEY)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
            floors[(s["bench"], s["target"], s["compiler"], params)] = value
        found = cell.get(PROFILE_KEY)
        if isinstance(found, dict) and all(isinstance(k, str) and isinstance(v, (int, float))
                                           and not isinstance(v, bool) for k, v in found.items()):
            profiles[(s["bench"], s["target"], s["compiler"], s["variant"], params)] = found
    return floors, profiles


def _params(params: dict) -> tuple:
    return tuple(sorted((k, v) for k, v in params.items() if k != "count"))


def run_causes(tables, run: dict | None, profiles=(), samples=()) -> dict[tuple, list[RowCause]]:
    """(bench, metric, target, compiler) of each table -> its rows' causes (see the module's docstring)."""
    changed = _changed(run)
    measured = ((run or {}).get("provenance") or {}).get(MEASURED_KEY)
    measured = measured if isinstance(measured, dict) else {}
    checks = ((run or {}).get("provenance") or {}).get("layout_check")
    checks = checks if isinstance(checks, dict) else {}
    floors, cell_profiles = _cell_facts(list(samples))
    by_symbols = {}
    for p in profiles or ():
        if p.exact:
            by_symbols[(p.bench, p.target, p.compiler, p.variant)] = p.symbols
    profile_rows = {}
    for t in tables:
        if t.exact and t.bench.endswith(PROFILE_SUFFIX):
            for r in t.rows:
                name = r.params.get("count", "")
                if name.startswith(SYMBOL_PREFIX):
                    for v in t.variants:
                        if r.median(v) is not None:
                            key = (t.bench[:-len(PROFILE_SUFFIX)], t.target, t.compiler, v, _params(r.params))
                            profile_rows.setdefault(key, {})[name[len(SYMBOL_PREFIX):]] = r.median(v)
    attributions: dict[tuple, tuple[Attribution | None, str]] = {}
    out: dict[tuple, list[RowCause]] = {}
    for t in tables:   # the counts first: a timed row takes the cause of its counts
        if not t.exact or t.bench.endswith(PROFILE_SUFFIX) or len(t.variants) < 2:
            continue
        base = t.variants[0]
        for r in t.rows:
            if r.params.get("count") not in TOTALS:
                continue
            for v in t.variants[1:]:
                if r.median(base) is None or r.median(v) is None:
                    continue
                key = (t.bench, t.target, t.compiler, v, _params(r.params))
                names = changed.get(cell_key(v, t.target, t.compiler))
                old, new = (by_symbols.get((t.bench, t.target, t.compiler, x))
                            or cell_profiles.get((t.bench, t.target, t.compiler, x, _params(r.params)))
                            or profile_rows.get((t.bench, t.target, t.compiler, x, _params(r.params)))
                            for x in (base, v))
                floor = floors.get((t.bench, t.target, t.compiler, _params(r.params)))
                note = (f"A/A floor {floor:,.0f} kernel insns/iter: the baseline booted twice, one extra ignored "
                        f"command-line word" if floor is not None else "")
                if floor is None and r.params.get("count") == TOTALS[0]:
                    floor = 0.0   # a user program's count per iteration (n and 2n differenced) ignores layout
                    note = ("A/A floor 0: a program's count per iteration does not move with its layout "
                            "(relinks count alike)")
                a = None
                if names is not None and old and new:
                    a = attribute(old, new, names, floor=floor, total_old=r.median(base), total_new=r.median(v),
                                  unit="insns/iter", calls=1)
                elif names == []:   # no code changed anywhere: the whole delta is elsewhere
                    a = attribute({}, {}, [], floor=floor, total_old=r.median(base), total_new=r.median(v),
                                  unit="insns/iter")
                elif names:
                    attributions[key] = (None, note)
                    c = _without_profile(names, measured.get(t.bench))
                    out.setdefault(_tkey(t), []).append(RowCause(v, dict(r.params), None, c, note,
                                                                 layout_check=_checked(t, r, v, checks)))
                    continue
                attributions[key] = (a, note)
                out.setdefault(_tkey(t), []).append(RowCause(v, dict(r.params), a, cause(a), note,
                                                             layout_check=_checked(t, r, v, checks)))
    memfns, counted = _memfn_columns(samples), {}
    for t in sorted(tables, key=lambda t: not t.exact):   # the counts first: a timed row takes theirs
        if any((t.bench, t.target, t.compiler, v) in memfns for v in t.variants):
            _memfn_causes(t, memfns, changed, run, out, counted)
    for t in tables:
        if t.exact or len(t.variants) < 2 or _tkey(t) in out:
            continue
        for r in t.rows:
            for v in t.variants[1:]:
                if v not in r.changes:
                    continue
                a, note = attributions.get((t.bench, t.target, t.compiler, v, _params(r.params)), (None, ""))
                band, better = r.band_verdicts.get(v), _better(r.changes[v])
                out.setdefault(_tkey(t), []).append(RowCause(v, dict(r.params), a, cause(a, band=band, better=better),
                                                             note, band, _checked(t, r, v, checks), better))
    return out


MEMFN_KINDS = ("memcpy", "memset", "memmove")
MEMFN_COUNTS = ("insns_per_byte", "insns_per_call")     # a sweep's exact rows: per byte is shown, per call kept


def _memfn_columns(samples) -> dict[tuple, tuple[str, str]]:
    """(bench, target, compiler, column) of a memcpy-like sweep -> (build variant, function measured)."""
    out = {}
    for s in samples:
        cell = s.get("provenance")
        if isinstance(cell, dict) and cell.get("bench_kind") in MEMFN_KINDS:
            variant, function = cell.get("variant"), cell.get("function")
            if isinstance(variant, str) and isinstance(function, str):
                out[(s["bench"], s["target"], s["compiler"], s["variant"])] = (variant, function)
    return out


def _memfn_code(t, memfns, changed: dict, baseline: str | None, v: str) -> Cause | bool | None:
    """Column v against the table's first: a direct Cause when the function measured differs or
    changed code; False when its code is the same in both builds; None when that is not known."""
    (vb, fb), (vv, fv) = (memfns.get((t.bench, t.target, t.compiler, c), (None, None)) for c in (t.variants[0], v))
    if fb is None or fv is None:
        return None
    if fv != fb:
        return Cause("direct", f"another function: {fv} against {fb}", (fv,))
    if vv == vb:
        return False

    def moved(variant: str) -> bool | None:   # the function's code against the run's baseline build
        if variant == baseline:
            return False
        names = changed.get(cell_key(variant, t.target, t.compiler))
        return None if names is None else fv in names
    here, there = moved(vv), moved(vb)
    if here is None or there is None or (here and there):
        return None
    if here or there:
        return Cause("direct", f"{fv} changed code (the function measured)", (fv,))
    return False


def _memfn_causes(t, memfns, changed: dict, run: dict | None, out: dict, counted: dict) -> None:
    """A memcpy-like sweep's causes, per compared column and row: direct when the function
    measured is another one or changed code; else the counts' move judged against a floor of 0
    (a program's counts do not move with its layout): layout when they did not move; unknown
    when the builds' code was not compared. A timed row takes its counts' attribution (COUNTED)."""
    from flagbench.stats.layout import BEYOND, WITHIN
    order = ((run or {}).get("provenance") or {}).get("variants")
    builds = {b for b, _ in memfns.values()}
    baseline = next((v for v in order if v in builds), None) if isinstance(order, list) else None
    counts = {r.params.get("count") for r in t.rows}
    shown = next((c for c in MEMFN_COUNTS if c in counts), None)
    for r in t.rows:
        if t.exact and r.params.get("count") != shown:
            continue
        for v in t.variants[1:]:
            if (not t.exact and v not in r.changes) or r.median(v) is None or r.median(t.variants[0]) is None:
                continue
            code = _memfn_code(t, memfns, changed, baseline, v)
            band = None if t.exact else r.band_verdicts.get(v)
            key = (t.bench, t.target, t.compiler, v, _params(r.params))
            a = counted.get(key)
            if isinstance(code, Cause):
                c = code
            elif code is None:
                c = Cause("unknown", "the builds' code was not compared (asm): no cause")
            elif t.exact:
                a = counted[key] = attribute({}, {}, [], floor=0.0, total_old=r.median(t.variants[0]),
                                             total_new=r.median(v), unit=str(r.params.get("count")))
                c = cause(a)
            elif a is not None:
                c = cause(a, band=band, better=_better(r.changes.get(v)))
            else:
                better = _better(r.changes.get(v))
                timed = {BEYOND: "better beyond the layout band: not a regression" if better else
                         "time beyond the layout band",
                         WITHIN: "time within the layout band: not a regression"}.get(
                    band, "no layout band (the bench's `layouts`): not called a regression")
                c = Cause("layout", f"the function measured did not change code; {timed}",
                          regression=band == BEYOND and not better)
            out.setdefault(_tkey(t), []).append(RowCause(v, dict(r.params), a, c, band=band,
                                                         better=_better(r.changes.get(v))))


def _better(change) -> bool:
    """Is a timed change (stats.Change) an improvement? Its verdict says so in the metric's own
    direction ("faster" is better, also for a rate)."""
    return getattr(change, "verdict", None) == "faster"


def _without_profile(names: list[str], measured: str | None) -> Cause:
    """The cause of a count delta without per-symbol counts: direct when the function the bench
    times is among the changed ones (it runs, whatever else does), else unknown."""
    others = len(names) - (measured in names)
    more = f"{others} more changed function{'s' * (others != 1)}, " if others else ""
    if measured in names:
        return Cause("direct", f"{measured} (the bench's function) changed code; {more}no per-symbol "
                               f"counts (metrics \"profile\")", (measured,))
    return Cause("unknown", f"{len(names)} changed function{'s' * (len(names) != 1)}, no "
                            f"per-symbol counts (metrics \"profile\")")


def _checked(t, r, v: str, checks: dict) -> str:
    """The layout check's line for variant v of row r: its change with every function aligned,
    and whether the effect survives; or that the alignment could not move anything."""
    from flagbench.stats.verdict import fmt_exact, pct
    from flagbench.columns import ALIGN
    from flagbench.stats.layout import survives
    aligned = r.aligned.get(v)
    if aligned is None:
        return ""
    for name in (v, t.variants[0]):
        moved = checks.get(cell_key(name.partition("+")[0], t.target, t.compiler))
        if isinstance(moved, dict) and moved.get("did_nothing"):
            return f"layout check: {moved.get('text', 'could not move anything')}"
    if aligned.verdict == "exact":
        change = fmt_exact(aligned)
    elif aligned.ci_low is None:
        change = f"~ {pct(aligned.ratio)} % (no interval)"
    else:
        change = (f"{'~ ' * (aligned.verdict == '~')}{pct(aligned.estimate)} % [{pct(aligned.ci_low)}, "
                  f"{pct(aligned.ci_high)}]{'' if aligned.verdict == '~' else ' ' + aligned.verdict}")
    return f"layout check, {ALIGN}-byte aligned: {change}: {survives(r.changes.get(v), aligned)}"


def _cut(line: str) -> str:
    return line if len(line) <= LINE_WIDTH else line[:LINE_WIDTH - 3] + "..."


def _tkey(t) -> tuple:
    return (t.bench, t.metric, t.target, t.compiler)


def cause_texts(found: list[RowCause], fmt: str, *, detail: bool = True) -> list[str]:
    """The lines under a table: per compared variant (and row), its cause line; for the first
    rows with counts, which functions and symbols carry the delta; the floor, once."""
    out: list[str] = []
    variants = {rc.variant for rc in found}
    rows = {_params(rc.params) for rc in found}
    varying = {k for k, _ in set().union(*rows) if len({dict(r).get(k) for r in rows}) > 1}   # a sweep's axes
    for i, rc in enumerate(found):
        if i >= ROWS_SHOWN * len(variants):
            kinds: dict[str, int] = {}
            for rest in found[i:]:
                kinds[rest.cause.kind] = kinds.get(rest.cause.kind, 0) + 1
            out.append(f"{len(found) - i} more rows: " + ", ".join(f"{n} {k}" for k, n in kinds.items())
                       + " (--format json has each)")
            break
        where = []
        if len(variants) > 1:
            where.append(rc.variant)
        if len(rows) > 1:
            where.append(",".join(f"{k}={v}" for k, v in _params(rc.params) if k in varying))
        prefix = " ".join(where) + ": " if where else ""
        c = rc.cause
        if prefix and rc.attribution is not None:   # said again in the columns the prefix leaves
            c = cause(rc.attribution, band=rc.band, width=LINE_WIDTH - len(prefix), better=rc.better)
        line = prefix + cause_line(c, fmt)
        limit = LINE_WIDTH + (4 if fmt == "md" else 0)
        out.append(line if len(line) <= limit else line[:limit - 3] + "...")
        if detail and rc.attribution is not None and rc.attribution.changed and len(rows) == 1:
            out += [_cut("  " + x) for x in attribution_lines(rc.attribution, fmt, top=3)[:-1]]
        if rc.layout_check:
            out.append(_cut("  " + rc.layout_check))
    notes = sorted({rc.floor_note for rc in found if rc.floor_note})
    out += notes
    return out
