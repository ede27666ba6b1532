"""Where a count delta lives and why: per-function attribution against the A/A floor, and a cause.

A total is not evidence of a commit's effect: a kernel that moves code moves where its allocator walks
and where interrupts land (DESIGN.md, "Watching, mail, causes and models": a commit growing
`__bitmap_set` moved a 10,000-`access()` bench by +843,081 instructions, all in slob, against an A/A
floor of 7,402,081). Given per-symbol counts of A and B, the functions whose code changed (normalised
asm, asm/compare.py) and the A/A floor of the configuration, `attribute` splits the delta into

- `changed`: each function whose code changed and that the bench executes, with its count delta (and
  per call when the bench says how many calls the counts cover);
- `elsewhere`: the rest of the delta, with the symbols that carry it, within or beyond the floor;

and `cause` names what the verdict rests on, one of CAUSES:

- direct:   functions on the measured path changed code;
- indirect: the code on the path is the same, but counts moved beyond the A/A floor (callees reached
            through data, inlining elsewhere, data);
- layout:   no code change on the path and the counts stayed within the floor: a timed change is judged
            against the layout band (stats/layout.py) and never called a regression unless beyond it;
- unknown:  no per-symbol data.

The API other stages call (series, bisect, watch: keep these names and fields stable):

    attribute(old, new, changed, *, floor=None, path=None, calls=None, total_old=None,
              total_new=None, unit="insns", top=TOP) -> Attribution
    cause(attribution | None, *, band=None, layout_check=None, width=LINE_WIDTH) -> Cause
    cause_line(cause, fmt="text") -> str          # one line < 100 columns: text, md, html; json: a dict
    attribution_lines(attribution, fmt="text") -> list[str]   # the changed functions and the elsewhere line
    changed_functions(asm_comparison) -> tuple[str, ...]      # names whose code changed, added or removed
    Attribution.to_json(), Cause.to_json()        # plain dicts for --format json

`old`/`new` map symbol names to counts (one unit, e.g. instructions per iteration: a guest's
RowResult.profile divided by its iterations, a profile.Profile's `symbols`); names are grouped by base
name as profile.diff does (`f.constprop.0` is `f`) and asm's object qualifier (`jhash.o:helper`) is
dropped. `changed` is any iterable of function names (e.g. the names of an AsmComparison's functions
whose status is not "same"). `floor` is the A/A floor in the counts' unit, absolute (>= 0); None
when it was not measured. `path`: the symbols on the measured path; by default every symbol with a
non-zero count in A or B (the symbols the bench executed).

>>> a = attribute({"loop": 100, "helper": 50, "alloc": 10}, {"loop": 130, "helper": 50, "alloc": 13},
...               ["loop", "unused.o:cold_fn"], floor=5)
>>> [(d.name, d.delta) for d in a.changed], a.elsewhere_delta, a.within_floor, a.changed_off_path
([('loop', 30)], 3, True, ('cold_fn',))
>>> c = cause(a)
>>> c.kind, cause_line(c)
('direct', 'cause: direct: loop +30; elsewhere +3, within the A/A floor 5 (alloc +3)')
>>> cause(attribute({"loop": 100}, {"loop": 100}, [])).kind, cause(None).kind
('layout', 'unknown')
"""
from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from flagbench.profile import base_name

CAUSES = ("direct", "indirect", "layout", "unknown")
TOP = 5                 # symbols named beside the elsewhere delta
LINE_WIDTH = 97         # a cause line fits a mail's 100 columns, as a list item ("- ") too
FORMATS = ("text", "md", "html", "json")


def symbol_key(name: str) -> str:
    """The name counts and asm agree on: no object qualifier, no compiler suffix.

    >>> symbol_key("jhash.o:helper.constprop.0"), symbol_key("strncpy_from_user"), symbol_key("(no symbol)")
    ('helper', 'strncpy_from_user', '(no symbol)')
    """
    if ":" in name and not name.startswith("("):
        name = name.rsplit(":", 1)[1]
    return base_name(name)[0]


def changed_functions(comparison) -> tuple[str, ...]:
    """The functions of an asm.compare.AsmComparison whose normalised code is not the same in both
    (changed, added, removed): what `attribute` takes as `changed`."""
    return tuple(d.name for d in comparison.functions if d.status != "same")


def _number(x, what: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{what} must be a finite number, not {x!r}")
    return x


def _num(x: float) -> str:
    """A count as an integer when it is one, else with one decimal; thousands separated.

    >>> _num(843081.0), _num(-2.25), _num(0)
    ('843,081', '-2.2', '0')
    """
    if float(x).is_integer():
        return f"{int(x):,}"
    return f"{x:,.1f}"


def _signed(x: float) -> str:
    return ("+" if x >= 0 else "") + _num(x)


@dataclass(frozen=True)
class SymbolDelta:
    """One symbol's count in A and B (0 where it was not executed)."""
    name: str
    old: float
    new: float
    calls: float | None = None      # calls the counts cover, when the bench declares them

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("a symbol needs a name")
        _number(self.old, f"{self.name}'s old count")
        _number(self.new, f"{self.name}'s new count")
        if self.calls is not None and not (_number(self.calls, "calls") > 0):
            raise ValueError("calls must be > 0")

    @property
    def delta(self) -> float:
        return self.new - self.old

    @property
    def per_call(self) -> float | None:
        return None if self.calls is None else self.delta / self.calls

    def text(self) -> str:
        """`name +delta` (and `(+x/call)` when calls are known).

        >>> SymbolDelta("strncpy_from_user", 1360129, 5170291, calls=10000).text()
        'strncpy_from_user +3,810,162 (+381/call)'
        """
        out = f"{self.name} {_signed(self.delta)}"
        if self.per_call is not None and self.calls != 1:   # per iteration already is per call
            out += f" ({_signed(round(self.per_call, 1))}/call)"
        return out

    def to_json(self) -> dict:
        return {"name": self.name, "old": self.old, "new": self.new, "delta": self.delta,
                "per_call": self.per_call}


@dataclass(frozen=True)
class Attribution:
    """A count delta split into the functions whose code changed and everything else.

    Checked when made: the parts add up to the total (changed + elsewhere = total delta)."""
    unit: str
    total_old: float
    total_new: float
    changed: tuple[SymbolDelta, ...]        # changed code, executed: largest |delta| first
    elsewhere: tuple[SymbolDelta, ...]      # the top symbols of the rest (same code), largest |delta| first
    elsewhere_delta: float                  # total delta minus the changed functions' deltas
    floor: float | None = None              # A/A floor, absolute, in `unit`; None: not measured
    changed_off_path: tuple[str, ...] = ()  # changed code the bench never executed
    calls: float | None = None

    def __post_init__(self):
        _number(self.total_old, "total_old")
        _number(self.total_new, "total_new")
        _number(self.elsewhere_delta, "elsewhere_delta")
        if self.floor is not None and _number(self.floor, "floor") < 0:
            raise ValueError("the A/A floor is a distance: >= 0")
        for part in (self.changed, self.elsewhere):
            if not isinstance(part, tuple) or not all(isinstance(d, SymbolDelta) for d in part):
                raise ValueError("changed and elsewhere are tuples of SymbolDelta")
        names = [d.name for d in self.changed]
        if len(set(names)) != len(names) or set(names) & {d.name for d in self.elsewhere}:
            raise ValueError("a symbol is either changed or elsewhere, once")
        parts = self.attributed_delta + self.elsewhere_delta
        if not math.isclose(parts, self.total_delta, rel_tol=1e-9, abs_tol=1e-6):
            raise ValueError(f"the parts ({parts}) do not add up to the total delta ({self.total_delta})")

    @property
    def total_delta(self) -> float:
        return self.total_new - self.total_old

    @property
    def attributed_delta(self) -> float:
        """The delta in functions whose code changed."""
        return sum(d.delta for d in self.changed)

    @property
    def beyond_floor_delta(self) -> float:
        """The part of the elsewhere delta past the A/A floor, its sign kept (0 within it); all of
        it when no floor was measured.

        >>> attribute({"a": 10, "b": 5}, {"a": 10, "b": 12}, [], floor=4).beyond_floor_delta
        3.0
        """
        e = self.elsewhere_delta
        if self.floor is None:
            return e
        return math.copysign(abs(e) - self.floor, e) if abs(e) > self.floor else 0

    @property
    def effect_delta(self) -> float:
        """The changed functions' delta plus whatever of the rest lies beyond the A/A floor: the
        change a commit is answerable for, and what bisect's threshold applies to by default
        (`flagbench bisect --on attributed`; `--on total` takes total_delta)."""
        return self.attributed_delta + self.beyond_floor_delta

    @property
    def within_floor(self) -> bool | None:
        """Is the elsewhere delta within the A/A floor? None when no floor was measured."""
        return None if self.floor is None else abs(self.elsewhere_delta) <= self.floor

    def floor_text(self) -> str:
        """`within the A/A floor 5`, `beyond the A/A floor 0` or `no A/A floor measured`."""
        if self.floor is None:
            return "no A/A floor measured"
        return ("within" if self.within_floor else "beyond") + f" the A/A floor {_num(self.floor)}"

    def elsewhere_text(self, top: int = 2) -> str:
        """`elsewhere +3, within the A/A floor 5 (alloc +3)`: the rest of the delta, its verdict,
        then up to `top` symbols that carry it."""
        carriers = [d.text() for d in self.elsewhere[:top] if d.delta]
        out = f"elsewhere {_signed(self.elsewhere_delta)}, {self.floor_text()}"
        return out + (f" ({', '.join(carriers)})" if carriers else "")

    def to_json(self) -> dict:
        return {"unit": self.unit, "total_old": self.total_old, "total_new": self.total_new,
                "total_delta": self.total_delta, "attributed_delta": self.attributed_delta,
                "effect_delta": self.effect_delta,
                "changed": [d.to_json() for d in self.changed],
                "elsewhere_delta": self.elsewhere_delta, "elsewhere": [d.to_json() for d in self.elsewhere],
                "floor": self.floor, "within_floor": self.within_floor,
                "changed_off_path": list(self.changed_off_path), "calls": self.calls}


def _grouped(counts: Mapping[str, float], what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, value in counts.items():
        if not isinstance(name, str):
            raise ValueError(f"{what}: symbol names are strings, not {name!r}")
        key = symbol_key(name)
        out[key] = out.get(key, 0) + _number(value, f"{what}[{name!r}]")
    return out


def attribute(old: Mapping[str, float], new: Mapping[str, float], changed: Iterable[str], *,
              floor: float | None = None, path: Iterable[str] | None = None, calls: float | None = None,
              total_old: float | None = None, total_new: float | None = None, unit: str = "insns",
              top: int = TOP) -> Attribution:
    """Split new - old into the changed functions on the path and the rest (see the module's docstring).

    `total_old`/`total_new`: the bench's totals when the per-symbol counts do not cover all of it
    (a guest's kernel instructions beside its profile); by default the sums of the counts. The
    part of the total no symbol carries is in `elsewhere_delta`."""
    a, b = _grouped(old, "old"), _grouped(new, "new")
    changed_keys = {symbol_key(n) for n in changed}
    executed = {k for k in (*a, *b) if a.get(k, 0) or b.get(k, 0)}
    on_path = executed if path is None else {symbol_key(n) for n in path} & executed
    t_old = sum(a.values()) if total_old is None else _number(total_old, "total_old")
    t_new = sum(b.values()) if total_new is None else _number(total_new, "total_new")

    def delta(k: str) -> SymbolDelta:
        return SymbolDelta(k, a.get(k, 0), b.get(k, 0), calls)

    order = lambda d: (-abs(d.delta), -max(d.old, d.new), d.name)   # noqa: E731
    hit = sorted((delta(k) for k in changed_keys & on_path), key=order)
    rest = sorted((delta(k) for k in executed - (changed_keys & on_path)), key=order)
    attributed = sum(d.delta for d in hit)
    return Attribution(unit, t_old, t_new, tuple(hit), tuple(d for d in rest[:top] if d.delta),
                       (t_new - t_old) - attributed, floor, tuple(sorted(changed_keys - on_path)), calls)


@dataclass(frozen=True)
class Cause:
    """What a verdict rests on: one of CAUSES, and the words that say why (see `cause`)."""
    kind: str
    why: str                                # after "cause: KIND: "
    functions: tuple[str, ...] = ()         # direct: changed functions; indirect: symbols that moved
    regression: bool = True                 # False: a layout effect within its band or floor

    def __post_init__(self):
        if self.kind not in CAUSES:
            raise ValueError(f"a cause is one of {', '.join(CAUSES)}, not {self.kind!r}")
        if "\n" in self.why:
            raise ValueError("a cause is one line")

    def to_json(self) -> dict:
        return {"kind": self.kind, "why": self.why, "functions": list(self.functions),
                "regression": self.regression, "line": cause_line(self)}


def cause(attribution: Attribution | None, *, band: str | None = None, layout_check: str | None = None,
          width: int = LINE_WIDTH, better: bool = False) -> Cause:
    """The cause of a verdict from its counts' attribution. `band`: a timed verdict's place against
    its layout band (stats.layout.BEYOND / WITHIN), which decides whether a layout-only change may
    be called a regression; `layout_check`: the layout check's answer in a few words (appended);
    `width`: the columns its line may take (less than LINE_WIDTH when something goes before it);
    `better`: the timed change is an improvement (beyond the band it is still no regression).

    >>> cause(attribute({"f": 1}, {"f": 1}, []), band="beyond layout noise", better=True).why
    'no changed code ran; better beyond the layout band: not a regression'
    """
    from flagbench.stats.layout import BEYOND, WITHIN
    tail = f"; {layout_check}" if layout_check else ""
    if attribution is None:
        return Cause("unknown", "no per-symbol counts" + tail, regression=True)
    a = attribution
    if a.changed:
        def direct(n: int, k: int) -> str:
            names = ", ".join(d.text() for d in a.changed[:n]) + (" ..." if len(a.changed) > n else "")
            return f"{names}; {a.elsewhere_text(k)}{tail}"
        choices = [direct(n, k) for n, k in ((3, 2), (2, 1), (1, 1), (1, 0))]
        return Cause("direct", _fitting("direct", choices, width), tuple(d.name for d in a.changed))
    moved = tuple(d.name for d in a.elsewhere if d.delta)
    beyond_counts = (a.within_floor is False) or (a.floor is None and a.total_delta != 0)
    if beyond_counts:
        return Cause("indirect", _fitting("indirect", [f"no changed code ran; {a.elsewhere_text(k)}{tail}"
                                                      for k in (3, 2, 1, 0)], width), moved)
    regression = band == BEYOND and not better
    timed = {BEYOND: "; better beyond the layout band" if better else "; time beyond the layout band",
             WITHIN: "; time within the layout band"}.get(band, "")
    end = "" if regression else ": not a regression"
    counts = ["counts the same"] if not a.total_delta else \
        [a.elsewhere_text(k) for k in (2, 1, 0)] + [f"{_signed(a.elsewhere_delta)} {a.floor_text()}"]
    choices = [f"no changed code ran; {c}{timed}{end}{tail}" for c in counts]
    choices += [f"no changed code ran{timed}{end}{tail}",   # the counts are in the table above
                f"no changed code ran{end}{tail}"]         # the band: in the table too
    return Cause("layout", _fitting("layout", choices, width), moved, regression)


def _fitting(kind: str, choices: list[str], width: int = LINE_WIDTH) -> str:
    """The first of `choices` (most said first) whose cause line fits `width`, else the last."""
    for why in choices:
        if len(f"cause: {kind}: {why}") <= width:
            return why
    return choices[-1]


def _cut(line: str, width: int = LINE_WIDTH) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def cause_line(c: Cause, fmt: str = "text") -> str | dict:
    """The cause in one line under 100 columns: text (through textsafe.term_text), md (escaped as
    the report's Markdown is), html (escaped); json: a dict. Names come from binaries: never raw.

    >>> cause_line(Cause("layout", "no changed code ran; counts the same: not a regression"), "md")
    '**cause: layout**: no changed code ran; counts the same: not a regression'
    >>> cause_line(Cause("direct", "a<b> +3"), "html")
    'cause: direct: a&lt;b&gt; +3'
    >>> print(cause_line(Cause("direct", "x" + chr(27) + "[2J +3")))
    cause: direct: x\\x1b[2J +3
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}")
    if fmt == "json":
        return c.to_json()
    plain = _cut(f"cause: {c.kind}: {c.why}")
    return _as(plain, fmt, bold=len(f"cause: {c.kind}"))


def _as(line: str, fmt: str, bold: int = 0) -> str:
    """A plain line in a format; `bold`: how many leading characters md makes bold."""
    from flagbench.textsafe import md_para, term_text
    if fmt == "md":
        return (f"**{md_para(line[:bold])}**" if bold else "") + md_para(line[bold:])
    if fmt == "html":
        return html.escape(line)
    return term_text(line)


def attribution_lines(a: Attribution, fmt: str = "text", top: int = TOP) -> list[str]:
    """The changed functions (one line each, top few) and the elsewhere line, each < 100 columns."""
    lines = [_cut(f"changed code: {d.text()} {a.unit}") for d in a.changed[:top]]
    if len(a.changed) > top:
        lines.append(f"changed code: {len(a.changed) - top} more functions")
    if a.changed_off_path:
        names = ", ".join(a.changed_off_path[:4]) + (" ..." if len(a.changed_off_path) > 4 else "")
        lines.append(_cut(f"changed code not executed by the bench: {names}"))
    lines.append(_cut(a.elsewhere_text(top)))
    return [_as(x, fmt) for x in lines]
