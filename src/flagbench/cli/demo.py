"""`flagbench demo`: the bundled case studies end to end.

For each case (cases/<name>/experiment.toml): build every cell, then for each target and
compiler the baseline variant against each other variant: `size` (symbols, sections,
padding) and `asm` (changed functions, instruction mix, the case's `show` functions side by
side when they changed); then `run` its benchmarks into the SQLite store (resuming what an
earlier demo measured). One report, a summary first (one line per bench and target, every
number a link to its table), written as Markdown to --out and as one HTML page with plots
beside it (out/demo.md, out/demo.html).
"""
from __future__ import annotations

import sys
from pathlib import Path



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
    p.add_argument("--full", action="store_true",
                   help="also the kernel cases that only compare builds (alignment, hppa, loongarch64: two cold kernel builds each)")
    return p


def run(args) -> int:
    from flagbench.errors import UserError
    from flagbench.report.doc import Heading, Html, Markdown, Para

    root = args.cases_dir or default_cases_dir()
    found = sorted(p.parent for p in root.glob("*/experiment.toml"))
    if not found:
        raise UserError(f"{root}: no case studies (*/experiment.toml) here; give --cases-dir")
    unknown = set(args.cases) - {p.name for p in found}
    if unknown:
        raise UserError(f"no case named {', '.join(sorted(unknown))} (cases: {', '.join(p.name for p in found)})")
    chosen = [p for p in found if not args.cases or p.name in args.cases]
    status, summaries, sections = 0, [], []
    for case in chosen:
        case_blocks, summary, case_status = demo_case(case, args)
        sections += case_blocks
        summaries += summary
        status = max(status, case_status)
        print(Markdown().render(case_blocks), flush=True)
    from flagbench.report.cells import LEGEND
    top = [Heading(1, "flagbench demo"), Heading(2, "Summary", "summary")] + summaries + [Para([LEGEND])]
    print(Markdown().render(top[1:]), flush=True)
    html_out = args.out.with_suffix(".html")
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(Markdown().render(top + sections), encoding="utf-8")
        html_out.write_text(Html().render(top + sections, "flagbench demo"), encoding="utf-8")
    except OSError as e:
        raise UserError(f"{args.out}: cannot write the report: {e.strerror or e}") from None
    print(f"report written to {args.out} and {html_out}; samples in {args.db} "
          f"(`flagbench report --list --db {args.db}`)", file=sys.stderr)
    return status


def demo_case(case: Path, args):
    """(blocks of the case's section, its summary blocks, exit status)."""
    from flagbench import build, spec
    from flagbench.pipeline import run_experiment
    from flagbench.report import blocks, failure_blocks, run_tables
    from flagbench.report.doc import Bullets, Heading, Link, Para
    from flagbench.report.sections import asm_blocks, pair_anchor, size_blocks, size_doc, size_summary
    from flagbench.report.summary import case_summary
    from flagbench.store import Store
    from flagbench.textsafe import sayer

    exp = spec.load(case)
    say = sayer(f"flagbench demo: {exp.name}: ")
    if exp.kernel is not None:
        return kernel_case(exp, args, say)
    notes = list(exp.notes)
    builds = build.build(exp, jobs=2, notes=notes, skip_missing=True, progress=say)
    baseline = exp.variants[0].name if exp.variants else ""
    details, sizes = [], {}
    by_pair: dict[tuple[str, str], list] = {}
    for b in builds:
        by_pair.setdefault((b.cell.target, b.cell.compiler), []).append(b)
    for (target, compiler), cells in by_pair.items():
        base = cells[0]
        for other in cells[1:]:
            old_label = f"{base.cell.variant.name}/{target}/{compiler}"
            new_label = f"{other.cell.variant.name}/{target}/{compiler}"
            key = (other.cell.variant.name, target, compiler)
            size_anchor = pair_anchor(exp.name, "size", *key)
            doc = size_doc(str(build.archive(base)), str(build.archive(other)))
            sizes[key] = (size_summary(doc), size_anchor)
            details += [Heading(3, f"{new_label} vs {old_label}", pair_anchor(exp.name, "pair", *key))]
            details += size_blocks(doc, anchor=size_anchor, label=f"{new_label} vs {old_label}")
            details += asm_blocks(base.objects, other.objects, old_label=old_label, new_label=new_label,
                                  show=tuple(exp.show), anchor=pair_anchor(exp.name, "asm", *key))
    status, tables, failures = 0, [], []
    if exp.benches:
        outcome, _ = run_experiment(case, db=args.db, samples=args.samples, fresh=args.fresh, fmt="json")
        status = outcome.status
        with Store(args.db, create=False) as store:
            tables = run_tables(store, outcome.run_id)
            failures = [c for c in store.cells(outcome.run_id) if c["status"] == "failed"]
    profiled = _profiles(exp, builds, args, say)
    summary = case_summary(tables, prefix=exp.name, baseline=baseline, sizes=sizes)
    overview = [Para([Link(exp.name, exp.name), f": {exp.description}"]), summary]
    section = [Heading(2, exp.name, exp.name), Para([exp.description]), summary]
    if notes:
        section.append(Bullets([f"note: {n}" for n in notes]))
    section += details
    if tables or failures:
        section += [Heading(3, f"{exp.name}: benchmarks", f"{exp.name}-benchmarks")]
        section += blocks(tables, prefix=exp.name, figures=True) + failure_blocks(failures)
    if profiled:
        section += [Heading(3, f"{exp.name}: where the instructions and the time go", f"{exp.name}-profiles")]
        section += profiled
    return section, overview, status


def kernel_case(exp, args, say):
    """A kernel experiment's section comes from the kernel stage (`flagbench.kernel.demo.case_section`,
    returning the same three things as demo_case); until it is there, a line that says so."""
    from flagbench.report.doc import Heading, Link, Para
    try:
        from flagbench.kernel.demo import case_section
    except ImportError:
        say("a kernel case: not in this demo yet (flagbench build/size/asm take it)")
        note = Para([f"{exp.name}: a kernel case, not part of this demo yet: `flagbench size {exp.path}` and "
                     f"`flagbench asm {exp.path}` compare its builds"])
        return [Heading(2, exp.name, exp.name), Para([exp.description]), note], \
            [Para([Link(exp.name, exp.name), f": {exp.description} (kernel case: not run by this demo yet)"])], 0
    return case_section(exp, args, say)


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
