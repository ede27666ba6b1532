"""A kernel case in `flagbench demo`: `case_section(exp, args, say)` returns what
cli/demo.py's demo_case returns for a C case: (the case's blocks, its summary blocks, status).

The baseline variant is built and compared with each other variant on each target and
compiler: the paste-under-the-patch summary, the vmlinux size table and asm (the report's own
size and asm blocks, on vmlinux), and which objects' code changed. Cases with guest benches
are built with the boot fragments, as the run stage builds them, so the benches' kernels are
the compared ones; their benches then run through the run pipeline like a C case's.

Only the x86_64 tinyconfig-sized case that boots fits `make demo`'s budget; the other kernel
cases (alignment, hppa, loongarch64: two cold kernel builds each) need `--full` (args.full).
"""
from __future__ import annotations

DEMO_TARGETS = ("x86_64",)


def _boots(exp) -> bool:
    """Whether a bench of the case runs inside its booted kernels (guest = true)."""
    return any(b.guest for b in exp.benches)


def in_quick_demo(exp) -> bool:
    """`make demo` builds the kernel cases that boot (their guest numbers are what no C case
    can give) on x86_64; the others are two more cold kernel builds each: --full."""
    return _boots(exp) and all(t in DEMO_TARGETS for t in exp.targets)


def case_section(exp, args, say):
    from flagbench.kernel import kbuild, objects, summary
    from flagbench.report.doc import Bullets, Code, Heading, Link, Para
    from flagbench.report.sections import asm_blocks, pair_anchor, size_blocks, size_doc, size_summary
    from flagbench.report.summary import case_summary

    head = [Heading(2, exp.name, exp.name), Para([exp.description])]
    if not in_quick_demo(exp) and not getattr(args, "full", False):
        say("a kernel case with two more cold kernel builds: only with --full")
        text = f"{exp.name}: kernel case for {', '.join(exp.targets)}, built with `flagbench demo --full` " \
               f"or `flagbench size {exp.path} --summary`"
        return head + [Para([text])], [Para([Link(exp.name, exp.name), f": {exp.description} (--full)"])], 0
    from flagbench.kernel import boot   # the kernels the guest benches boot are the compared ones
    extra = boot.boot_fragments(exp) if _boots(exp) else []
    builds = kbuild.build_kernels(exp, jobs=None, progress=True, extra_fragments=extra)
    failed = [b for b in builds if not b.ok]
    details, sizes = [], {}
    by_pair: dict[tuple[str, str], list] = {}
    for b in builds:
        if b.ok:
            by_pair.setdefault((b.cell.target, b.cell.compiler), []).append(b)
    for (target, compiler), cells in by_pair.items():
        base = cells[0]
        for other in cells[1:]:
            old_label, new_label = base.cell.key, other.cell.key
            key = (other.cell.variant.name, target, compiler)
            doc = size_doc(str(base.vmlinux), str(other.vmlinux))
            size_anchor = pair_anchor(exp.name, "size", *key)
            sizes[key] = (size_summary(doc), size_anchor)
            s = summary.summarize(base, other)
            details += [Heading(3, f"{new_label} vs {old_label}", pair_anchor(exp.name, "pair", *key)),
                        Code(summary.render(s).rstrip().splitlines())]
            details += size_blocks(doc, anchor=size_anchor, label=f"vmlinux {new_label} vs {old_label}")
            details += [Code(objects.render(s.objects, top=10).rstrip().splitlines())]
            details += asm_blocks([base.vmlinux], [other.vmlinux], old_label=old_label, new_label=new_label,
                                  show=tuple(exp.show), anchor=pair_anchor(exp.name, "asm", *key))
    for b in failed:
        details += [Para([f"{b.cell.key} did not build:"]), Code((b.error or "").splitlines())]
    status, tables = (1 if failed else 0), []
    if exp.benches and not failed:
        from flagbench.pipeline import run_experiment
        from flagbench.report import blocks, run_tables
        from flagbench.store import Store
        from flagbench.errors import UserError
        try:
            outcome, _ = run_experiment(exp.path, db=args.db, samples=args.samples, fresh=args.fresh, fmt="json")
        except UserError as e:   # the benches could not run: the comparison above still stands
            details += [Para([f"benchmarks not run: {e}"])]
            outcome = None
        if outcome is not None:
            status = max(status, outcome.status)
            with Store(args.db, create=False) as store:
                tables = run_tables(store, outcome.run_id)
        if tables:
            details += [Heading(3, f"{exp.name}: benchmarks", f"{exp.name}-benchmarks")]
            details += blocks(tables, prefix=exp.name, figures=True)
    baseline = exp.variants[0].name if exp.variants else ""
    case = case_summary(tables, prefix=exp.name, baseline=baseline, sizes=sizes)
    built = ", ".join(f"{b.cell.key} {'cached' if b.cached else f'{b.seconds:.0f} s'}" for b in builds)
    section = head + [case, Bullets([f"built: {built}", f"tree: {builds[0].tree}" if builds else "no cells"])]
    return section + details, [Para([Link(exp.name, exp.name), f": {exp.description}"]), case], status

