"""Two cells of one experiment to compare: which variants, on which target, with which
compiler. Shared by the verbs that compare a pair (`asm`, `size`: built by subject.pair) and
by those that take one cell of it (`series`, `watch`).

The defaults make the short form of an experiment need no options: the first two
variants (the baseline and the first change), on the first target and compiler that can
be built. With a matrix, `--target` / `--compiler` pick the cell; anything that is not in
the experiment is a UserError that names what is.
"""
from __future__ import annotations

from typing import Sequence

from flagbench import spec
from flagbench.errors import UserError


def parse_variants(text: str | Sequence[str] | None) -> tuple[str, str] | None:
    """"A,B" (or ["A", "B"]) -> ("A", "B"); None stays None (the experiment's first two)."""
    if text is None:
        return None
    names = [n.strip() for n in (text.split(",") if isinstance(text, str) else text)]
    if len(names) != 2 or not all(names):
        raise UserError(f"--variants takes two variant names, OLD,NEW (got {text!r})")
    return names[0], names[1]


def choose(exp: spec.Experiment, variants: str | Sequence[str] | None = None, target: str | None = None,
           compiler: str | None = None) -> tuple[spec.Cell, spec.Cell, list[str]]:
    """The two cells to compare, and a note saying what else could have been chosen."""
    names = parse_variants(variants)
    if names is None:
        if len(exp.variants) < 2:
            raise UserError(f"{exp.path}: only one variant ({exp.variants[0].name}): nothing to compare it with")
        old_v, new_v = exp.variants[0], exp.variants[1]
    else:
        old_v, new_v = exp.variant(names[0]), exp.variant(names[1])

    pairs, skipped = exp.pairs()
    if target is not None and target not in exp.targets:
        raise UserError(f"{exp.path}: target {target!r} is not in the experiment "
                        f"(targets: {', '.join(exp.targets)})")
    if target is None:
        target = pairs[0][0]
    compilers = [c for t, c in pairs if t == target]
    # exp.pairs() says "skipped TARGET/COMPILER: why" for a pair nothing can build
    why = {n.split(":", 1)[0].removeprefix("skipped "): n.split(":", 1)[1].strip() for n in skipped}
    if not compilers:
        reasons = "; ".join(f"{k}: {v}" for k, v in why.items() if k.startswith(f"{target}/"))
        raise UserError(f"{exp.path}: no compiler here can build {target} ({reasons})")
    if compiler is None:
        compiler = compilers[0]
    elif compiler not in compilers:
        if f"{target}/{compiler}" in why:
            raise UserError(f"{exp.path}: {compiler} cannot build {target}: {why[f'{target}/{compiler}']}")
        raise UserError(f"{exp.path}: compiler {compiler!r} is not in the experiment for {target} "
                        f"(compilers: {', '.join(compilers)})")

    notes = []
    others = [f"{t}/{c}" for t, c in pairs if (t, c) != (target, compiler)]
    if others:
        notes.append(f"comparing on {target}/{compiler}; also in the experiment: {', '.join(others)} "
                     f"(--target, --compiler)")
    if names is None and len(exp.variants) > 2:
        notes.append(f"comparing variants {old_v.name} and {new_v.name}; also: "
                     f"{', '.join(v.name for v in exp.variants[2:])} (--variants A,B)")
    return spec.Cell(old_v, target, compiler), spec.Cell(new_v, target, compiler), notes
