"""`flagbench demo`: the bundled case studies end to end.

For each case (cases/<name>/experiment.toml): build every cell, then for each target and
compiler the baseline variant against each other variant: `size` (symbols, sections,
padding) and `asm` (changed functions, instruction mix, the case's `show` functions side by
side when they changed); then `run` its benchmarks into the SQLite store (resuming what an
earlier demo measured). One report, a summary first (one line per bench and target, every
number a link to its table), written as Markdown to --out and as one HTML page with plots
beside it (out/demo.md, out/demo.html); the terminal gets the summary and where the report is.
Cases come in the order of the seed threads; kernel cases that need --full are named, not run;
with --full the series case (cli/demo_series.py) comes last.
"""
from __future__ import annotations

import re
from pathlib import Path

from flagbench.cli import demo_series


def default_cases_dir() -> Path:
    """cases/ of the checkout this package runs from (an editable install), else ./cases."""
    here = Path(__file__).resolve().parents[3] / "cases"
    return here if here.is_dir() else Path("cases")


def register(sub):
    p = sub.add_parser("demo", help="run the bundled case studies end to end and write their report",
                       description=__doc__.split("\n\n")[1].replace("\n", " "))
    p.add_argument("cases", nargs="*", metavar="CASE", help="case names (default: every case)")
    p.add_argument("--cases-dir", type=Path, default=None, help="where the cases are (default: the bundled ones)")
    p.add_argument("--db", type=Path, default=Path("flagbench.db"), help="results database (default ./flagbench.db)")
    p.add_argument("--out", type=Path, default=Path("out/demo.md"),
                   help="report file (default out/demo.md; the html goes beside it, out/demo.html)")
    p.add_argument("--samples", type=int, default=None,
                   help="timed samples per cell (default: each bench's own, 10 unless its file says)")
    p.add_argument("--fresh", action="store_true", help="measure again instead of resuming earlier demo runs")
    p.add_argument("--until", metavar="PCT",
                   help="as run --until: sample on where an interval is wider than +-PCT (e.g. 3%%)")
    p.add_argument("--budget", default="10m", metavar="TIME",
                   help="with --until: measuring time per case (default 10m)")
    p.add_argument("--full", action="store_true",
                   help="also the kernel cases that only compare builds (alignment, hppa, loongarch64: two cold kernel builds "
                        "each) and the series case (a repository made from Debian's tree, five kernel builds)")
    return p


def seed_order(case: Path) -> tuple:
    """C cases first, then kernel cases, each in the order of the seed threads they come from
    ("Seed 003" in the experiment's first comment), then by name."""
    head = (case / "experiment.toml").read_text(errors="replace")[:400]
    m = re.search(r"[Ss]eed (\d+)", head)
    return (case.name.startswith("kernel-"), int(m.group(1)) if m else 999, case.name)


def run(args) -> int:
    from flagbench.errors import UserError
    from flagbench.report.case import case_blocks
    from flagbench.report.cells import LEGEND
    from flagbench.report.doc import Heading, Html, Markdown, Para

    from flagbench.run.until import parse_budget, parse_width
    from flagbench.textsafe import sayer
    # read once, before any case is built (bad input: one line); the cases take the numbers
    args.until = None if args.until is None else parse_width(args.until)
    args.budget = parse_budget(args.budget)
    root = args.cases_dir or default_cases_dir()
    found = sorted((p.parent for p in root.glob("*/experiment.toml")), key=seed_order)
    if not found:
        raise UserError(f"{root}: no case studies (*/experiment.toml) here; give --cases-dir")
    series_case = demo_series.case_dir(root)
    names = [p.name for p in found] + ([demo_series.NAME] if series_case else [])
    unknown = set(args.cases) - set(names)
    if unknown:
        raise UserError(f"no case named {', '.join(sorted(unknown))} (cases: {', '.join(names)})")
    chosen = [p for p in found if not args.cases or p.name in args.cases]
    status, summaries, sections, skipped = 0, [], [], []
    for path in chosen:
        case, case_status = gather(path, args)
        if isinstance(case, str):   # not run (a kernel case that needs --full): a line, not a heading
            skipped.append(case)
            continue
        section, overview = case_blocks(case)
        sections += section
        summaries += overview
        status = max(status, case_status)
    if series_case and (not args.cases or demo_series.NAME in args.cases):
        if args.full:       # a repository of the whole tree and five kernel builds: the last case
            section, overview, case_status = demo_series.blocks(series_case, sayer(f"flagbench demo: {demo_series.NAME}: "),
                                                                args.db, fresh=args.fresh)
            sections += section
            summaries += overview
            status = max(status, case_status)
        else:
            skipped.append(f"{demo_series.NAME} (a kernel series, x86_64: flagbench demo --full)")
    if skipped:
        summaries.append(Para([f"not run: {'; '.join(skipped)}"]))
    top = [Heading(1, "flagbench demo"), Heading(2, "Summary", "summary")] + summaries + [Para([LEGEND])]
    html_out = args.out.with_suffix(".html")
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(Markdown().render(top + sections), encoding="utf-8")
        html_out.write_text(Html().render(top + sections, "flagbench demo"), encoding="utf-8")
    except OSError as e:
        raise UserError(f"{args.out}: cannot write the report: {e.strerror or e}") from None
    print(plain(top[1:-1]), end="", flush=True)
    print(f"\nsamples in {args.db}\n  (flagbench report --list --db {args.db})\n"
          f"full report: {args.out}\n         and {html_out}")   # one path a line: fits a mail
    return status


def plain(blocks, width: int | None = None) -> str:
    """Report blocks as terminal text: headings and paragraphs as lines, grids as aligned columns
    that fit `width` (a cell too wide is wrapped), links as their text (nothing to click on a terminal).

    >>> from flagbench.report.doc import Grid, Heading, Link, Para
    >>> print(plain([Heading(2, "Summary"), Para([Link("memcpy", "m"), ": a | b"]),
    ...              Grid(["bench", "time"], [[["x"], [Link("+1.0 % slower", "t")]]])]), end="")
    Summary
    <BLANKLINE>
    memcpy: a | b
    <BLANKLINE>
    bench  time
    -----  -------------
    x      +1.0 % slower
    <BLANKLINE>
    """
    import shutil
    from flagbench.report.doc import WIDTH, Bullets, Code, Grid, Heading, Para, fill

    width = width or min(WIDTH, max(80, shutil.get_terminal_size((120, 24)).columns))   # pasteable into a mail

    def text(cell) -> str:
        parts = cell if isinstance(cell, list) else [cell]
        return "".join(p if isinstance(p, str) else p.text for p in parts)

    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out += [b.text, ""]
        elif isinstance(b, Para):
            out += fill(text(b.parts), width) + [""]
        elif isinstance(b, Bullets):
            out += [line for item in b.items for line in fill(item, width, "- ", "  ")] + [""]
        elif isinstance(b, Code):
            out += [f"    {line}" for line in b.lines] + [""]
        elif isinstance(b, Grid):
            rows = [b.header] + [[text(c) for c in r] for r in b.rows]
            widths = _fit([max(len(r[i]) for r in rows) for i in range(len(b.header))], width)
            out += [b.title] if b.title else []
            out += _lines(rows[0], widths) + _lines(["-" * w for w in widths], widths)
            for r in rows[1:]:
                out += _lines(r, widths)
            out += [line for n in b.notes for line in fill(n, width, "- ", "  ")] + [""]
    return "\n".join(out) + "\n"


def _fit(widths: list[int], limit: int) -> list[int]:
    """Column widths that fit `limit` characters: the widest columns give way first, to one cap
    (none below 16).

    >>> _fit([10, 200, 90], 120), _fit([5, 6], 120)
    ([10, 53, 53], [5, 6])
    """
    gaps = 2 * (len(widths) - 1)
    cap = max(widths, default=0)
    while cap > 16 and sum(min(w, cap) for w in widths) + gaps > limit:
        cap -= 1
    return [min(w, cap) for w in widths]


def _lines(row: list[str], widths: list[int]) -> list[str]:
    """One grid row as terminal lines, a cell wider than its column wrapped at spaces."""
    import textwrap
    cells = [textwrap.wrap(c, w, break_on_hyphens=False) or [""] for c, w in zip(row, widths)]
    return ["  ".join((cell[k] if k < len(cell) else "").ljust(w) for cell, w in zip(cells, widths)).rstrip()
            for k in range(max(len(c) for c in cells))]


def gather(path: Path, args):
    """(report.case.Case of one experiment, exit status), or (a line saying why it was not run, 0)."""
    from flagbench import spec, subject
    from flagbench.textsafe import sayer
    exp = spec.load(path)
    say = sayer(f"flagbench demo: {exp.name}: ")
    if subject.of(exp).kind == "c":
        return gather_objects(exp, path, args, say)
    from flagbench.errors import UserError
    from flagbench.report.doc import Para
    case, status = gather_kernel(exp, args, say)
    if not isinstance(case, str) and exp.benches and status == 0:
        try:
            status = run_benches(case, path, args)
        except UserError as e:   # the benches could not run: the comparison of the builds still stands
            case.extra.append(Para([f"benchmarks not run: {e}"]))
    return case, status


def gather_objects(exp, path: Path, args, say):
    """Build every cell, compare the baseline with each variant, run the benches, take the profiles."""
    from flagbench import build
    from flagbench.report.case import Case, Pair
    from flagbench.report.sections import size_facts

    notes = list(exp.notes)
    with OneLine(say) as progress:
        builds = build.build(exp, jobs=2, notes=notes, skip_missing=True, progress=progress)
    case = Case(exp.name, exp.description, exp.variants[0].name if exp.variants else "", notes=notes,
                show=tuple(exp.show))
    by_pair: dict[tuple[str, str], list] = {}
    for b in builds:
        by_pair.setdefault((b.cell.target, b.cell.compiler), []).append(b)
    for (target, compiler), cells in by_pair.items():
        base = cells[0]
        for other in cells[1:]:
            case.pairs.append(Pair(other.cell.variant.name, target, compiler, base.cell.key, other.cell.key,
                                   size_facts(str(build.archive(base)), str(build.archive(other))),
                                   base.objects, other.objects))
    case.facts += toolchains(builds)
    status = run_benches(case, path, args)
    case.profiles = _profiles(exp, builds, args, say)
    return case, status


class OneLine:
    """Build progress on one line: the per-object "cc ..." lines become one line rewritten in
    place on a terminal ("cc 12/49: loop.c"), and are left out elsewhere (a log keeps the
    "N cells, M objects" line); every other line is said as it comes."""

    def __init__(self, say, stream=None):
        import sys
        import threading
        self.say, self.stream = say, stream or sys.stderr
        self.tty = self.stream.isatty()
        self.total, self.done, self.open = 0, 0, False
        self.lock = threading.Lock()

    def __call__(self, text: str) -> None:
        with self.lock:
            if text.startswith("cc "):
                self.done += 1
                if self.tty:
                    import shutil
                    from flagbench.textsafe import term_text
                    line = f"cc {self.done}/{self.total or '?'}: {term_text(text[3:])}"
                    self.stream.write("\r\x1b[K" + line[:shutil.get_terminal_size((100, 24)).columns - 1])
                    self.stream.flush()
                    self.open = True
                return
            m = re.match(r"(\d+) cells, (\d+) objects", text)
            if m:
                self.total, self.done = int(m.group(2)), 0
            self._end_line()
        self.say(text)

    def _end_line(self) -> None:
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with self.lock:
            self._end_line()
        return False


def toolchains(builds) -> list[str]:
    """One line per target and compiler: the tool versions its cells were built with (the seed
    thread's matrix had a gcc and a binutils axis: this says which the matrix here has)."""
    seen: dict[str, str] = {}
    for b in builds:
        versions = "; ".join(f"{tool}: {v}" for tool, v in b.tools.items())
        seen.setdefault(f"{b.cell.target}/{b.cell.compiler}", versions)
    return [f"toolchain {cell}: {versions}" for cell, versions in seen.items()]


def run_benches(case, path: Path, args) -> int:
    """Run the experiment's benches into the store (resuming) and put their tables in the case."""
    from flagbench.pipeline import run_experiment
    from flagbench.report import run_notes, run_tables, stored_causes
    from flagbench.spec import load
    from flagbench.store import Store

    benches = load(path).benches
    if not benches:
        return 0
    outcome, _ = run_experiment(path, db=args.db, samples=args.samples, fresh=args.fresh, fmt="json",
                                until=args.until, budget_s=args.budget)
    with Store(args.db, create=False) as store:
        case.tables = run_tables(store, outcome.run_id)
        case.causes = stored_causes(store, outcome.run_id, case.tables)   # under each table, as run prints them
        case.failures = [c for c in store.cells(outcome.run_id) if c["status"] == "failed"]
        # what the run said (a booted kernel's A/A noise floor, its profile): in the report, not only on stderr
        case.notes += [n for n in run_notes(store.run(outcome.run_id)) if n not in case.notes]
    case.facts += checked(benches, case.failures)
    return outcome.status


def checked(benches, failures: list[dict]) -> list[str]:
    """What the memory benches' correctness gate (harness/memcheck.c) found, said in the report:
    an implementation is measured only after it passed, so a table without it is a failure."""
    out = []
    for b in benches:
        if b.kind not in ("memcpy", "memmove", "memset"):
            continue
        bad = sorted({f["cell"].split("/")[0] for f in failures if f["bench"] == b.name and
                      "FAIL" in (f.get("reason") or "")})
        good = [f for f in b.functions if f not in bad]
        if good:
            out.append(f"{b.name}: {', '.join(good)} passed the exhaustive alignment x length check before "
                       f"being measured (harness/memcheck.c: every dst x src alignment 0..31 for lengths 0..99, "
                       f"148 alignment pairs for lengths up to 64 KiB + 1, guard bytes around the destination)")
        if bad:
            out.append(f"{b.name}: {', '.join(bad)} FAILED that check (see the failed cells): not measured")
    return out


# -- kernel cases: built by the kernel stage, laid out like any other (report/case.py)

DEMO_TARGETS = ("x86_64",)


def _boots(exp) -> bool:
    """Whether a bench of the case runs inside its booted kernels (guest = true)."""
    return any(b.guest for b in exp.benches)


def in_quick_demo(exp) -> bool:
    """`make demo` builds the kernel cases that boot (their guest numbers are what no C case
    can give) on x86_64; the others are two more cold kernel builds each: --full."""
    return _boots(exp) and all(t in DEMO_TARGETS for t in exp.targets)


def gather_kernel(exp, args, say):
    """(report.case.Case, exit status: 1 when a kernel did not build), or (why it was not run, 0)
    for a case that needs --full. The benches are the caller's to run (the run stage comes later)."""
    from flagbench.kbuild import build as kbuild
    from flagbench.size import objects, summary
    from flagbench.report.case import Case, Pair
    from flagbench.report.doc import Code, Para
    from flagbench.report.sections import size_facts

    if not in_quick_demo(exp) and not getattr(args, "full", False):
        say("a kernel case with two more cold kernel builds: only with --full")
        return f"{exp.name} (kernel, {', '.join(exp.targets)}: flagbench demo --full)", 0
    from flagbench.run.guest import boot   # the kernels the guest benches boot are the compared ones
    extra = boot.boot_fragments(exp) if _boots(exp) else []
    builds = kbuild.build_kernels(exp, jobs=None, progress=True, extra_fragments=extra)
    case = Case(exp.name, exp.description, exp.variants[0].name if exp.variants else "", show=tuple(exp.show))
    by_pair: dict[tuple[str, str], list] = {}
    for b in builds:
        if b.ok:
            by_pair.setdefault((b.cell.target, b.cell.compiler), []).append(b)
    for (target, compiler), cells in by_pair.items():
        base = cells[0]
        rules, legacy = summary.rules_of(base.src)
        types = summary.LEGACY_BOM_TABLES[None][0][1] if legacy else None
        for other in cells[1:]:
            s = summary.summarize(base, other)
            case.pairs.append(Pair(other.cell.variant.name, target, compiler, base.cell.key, other.cell.key,
                                   size_facts(str(base.vmlinux), str(other.vmlinux), types=types, rules=rules),
                                   [base.vmlinux], [other.vmlinux],
                                   before=[Code(summary.render(s).rstrip().splitlines())],
                                   after=[Code(objects.render(s.objects, top=10).rstrip().splitlines())],
                                   what="vmlinux "))
    failed = [b for b in builds if not b.ok]
    for b in failed:
        case.extra += [Para([f"{b.cell.key} did not build:"]), Code((b.error or "").splitlines())]
    built = ", ".join(f"{b.cell.key} {'cached' if b.cached else f'{b.seconds:.0f} s'}" for b in builds)
    case.facts = [f"built: {built}", f"tree: {builds[0].tree}" if builds else "no cells"]
    return case, 1 if failed else 0


def wants_profile(bench) -> bool:
    """Micro benches that ask for a profile, or for perf (the seed's `perf top` question)."""
    return bench.kind == "micro" and bool({"profile", "perf"} & set(bench.metrics))


def _profiles(exp, builds, args, say) -> list:
    """The profile diffs of the case's micro benches that want one (flagbench profile)."""
    from flagbench import procs
    from flagbench.profile_experiment import profile_experiment
    from flagbench.report.profiles import blocks as profile_blocks
    from flagbench.store import Store

    chosen = [b for b in exp.benches if wants_profile(b)]
    if not chosen:
        return []
    # benches whose metrics name "profile" were profiled by this demo's own run (pipeline): read
    # those from the store; measure only the ones that asked for perf alone
    profiles, notes = [], []
    with Store(args.db) as store, store.writer("flagbench demo"), procs.owned_dir("flagbench-profile") as workdir:
        for fresh, group in ((False, [b for b in chosen if "profile" in b.metrics]),
                             (args.fresh, [b for b in chosen if "profile" not in b.metrics])):
            if group:
                got, said = profile_experiment(exp, builds, group, store=store, workdir=Path(workdir),
                                               fresh=fresh, say=say)
                profiles += got
                notes += said
    return profile_blocks(profiles, exp.variants[0].name, prefix=exp.name, notes=notes)
