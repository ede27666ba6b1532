"""Attribution and cause from real builds: gcc -O2 objects compared by flagbench's asm stage,
per-symbol instruction counts from callgrind (n and 2n iterations differenced, as `flagbench run`
counts), and an A/A floor measured as `run` measures one: the baseline counted again relinked
with a padding object first, which moves every function and changes no instruction.

One program, four builds. Its bench is `loop(n)`, which calls `step` through a pointer each
iteration. The expected values are the nops the variants plant, not numbers from flagbench:
- layout:   B grows `unrelated` (placed before `loop`, never called by the bench) by 40 nops;
- direct:   B adds 3 nops to the loop body: `loop` +3 instructions per iteration;
- indirect: B points `step` at `fast_step` (2 nops) instead of `slow_step` (9 nops): no function's
            code changed, the counts drop by 7 per iteration.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from flagbench.attribution import (Attribution, Cause, SymbolDelta, attribute, attribution_lines, cause,
                                   cause_line, changed_functions)

PROGRAM = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define STR(x) #x
#define XSTR(x) STR(x)
#ifndef UNRELATED
#define UNRELATED 1
#endif
#ifndef LOOP_EXTRA
#define LOOP_EXTRA 0
#endif
#ifndef STEP
#define STEP slow_step
#endif
__attribute__((noinline)) uint64_t unrelated(uint64_t x)
{
    __asm__ volatile(".rept " XSTR(UNRELATED) "\n\tnop\n\t.endr");
    return x ^ 0x5a;
}
__attribute__((noinline)) uint64_t slow_step(uint64_t x)
{
    __asm__ volatile(".rept 9\n\tnop\n\t.endr");
    return x * 7 + 3;
}
__attribute__((noinline)) uint64_t fast_step(uint64_t x)
{
    __asm__ volatile(".rept 2\n\tnop\n\t.endr");
    return x * 7 + 3;
}
uint64_t (*volatile step)(uint64_t) = STEP;
__attribute__((noinline)) uint64_t loop(uint64_t n)
{
    uint64_t acc = 1;
    for (uint64_t i = 0; i < n; i++) {
        __asm__ volatile(".rept " XSTR(LOOP_EXTRA) "\n\tnop\n\t.endr");
        acc = step(acc + i);
    }
    return acc;
}
int main(int argc, char **argv)
{
    uint64_t n = argc > 2 ? strtoull(argv[2], 0, 10) : 1000;
    if (argc > 3)
        printf("%llu\n", (unsigned long long)unrelated(n));
    printf("%llu\n", (unsigned long long)loop(n));
    return 0;
}
"""
VARIANTS = {"base": [], "layout": ["-DUNRELATED=41"], "direct": ["-DLOOP_EXTRA=3"],
            "indirect": ["-DSTEP=fast_step"]}
ITERS = 1000

pytestmark = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("valgrind")),
                                reason="needs gcc and valgrind")


def _gcc(*args: str) -> None:
    subprocess.run(["gcc", *args], check=True, capture_output=True, text=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Each variant's object, its per-iteration profile and total; the A/A floor of the baseline."""
    from flagbench.run.profiled import exact_profile
    from flagbench.run.layout import pad_source
    root = tmp_path_factory.mktemp("attribution")
    (root / "prog.c").write_text(PROGRAM)
    out = {}
    for name, defines in VARIANTS.items():
        obj, exe = root / f"{name}.o", root / name
        _gcc("-O2", *defines, "-c", str(root / "prog.c"), "-o", str(obj))
        _gcc(str(obj), "-o", str(exe))
        (root / f"t-{name}").mkdir()
        out[name] = (obj, *exact_profile(exe, "x86_64", ITERS, root / f"t-{name}", 120)[:2])
    pad = root / "pad.o"   # the A/A control: the same object relinked 1008 bytes later
    _gcc("-c", str(pad_source(1008, root)), "-o", str(pad))
    _gcc(str(pad), str(out["base"][0]), "-o", str(root / "base-aa"))
    (root / "t-aa").mkdir()
    _, aa_total, _ = exact_profile(root / "base-aa", "x86_64", ITERS, root / "t-aa", 120)
    return out, abs(aa_total - out["base"][2])


def _attribution(built, variant: str) -> Attribution:
    from flagbench.asm.compare import compare_object_sets
    out, floor = built
    obj_a, prof_a, total_a = out["base"]
    obj_b, prof_b, total_b = out[variant]
    changed = changed_functions(compare_object_sets([obj_a], [obj_b]))
    return attribute(prof_a, prof_b, changed, floor=floor, total_old=total_a, total_new=total_b, calls=1)


def test_the_floor_of_user_counts_is_zero(built):
    """Relinking moves every function and executes the same instructions: a user program's A/A
    floor is 0, so any count move without a code change is beyond it."""
    assert built[1] == 0


def test_an_unrelated_function_before_the_loop_is_layout(built):
    a = _attribution(built, "layout")
    assert a.changed == () and a.changed_off_path == ("unrelated",)
    assert a.total_delta == 0 and a.elsewhere_delta == 0 and a.within_floor is True
    c = cause(a)
    assert c.kind == "layout" and not c.regression
    assert cause_line(c) == "cause: layout: no changed code ran; counts the same: not a regression"


def test_a_changed_loop_is_direct_with_its_count(built):
    a = _attribution(built, "direct")
    assert [d.name for d in a.changed] == ["loop"]
    assert a.changed[0].delta == 3 and a.changed[0].per_call == 3   # one call of the loop body per iteration
    assert a.attributed_delta == 3 and a.total_delta == 3 and a.elsewhere_delta == 0
    c = cause(a)
    assert c.kind == "direct" and c.functions == ("loop",) and c.regression
    assert cause_line(c) == "cause: direct: loop +3; elsewhere +0, within the A/A floor 0"


def test_a_callee_switched_through_a_pointer_is_indirect(built):
    a = _attribution(built, "indirect")
    assert a.changed == ()   # no function's code changed: the pointer's value did
    assert a.total_delta == -7 and a.elsewhere_delta == -7 and a.within_floor is False
    moved = {d.name: d.delta for d in a.elsewhere}
    assert set(moved) == {"slow_step", "fast_step"}   # the same body around 9 or 2 nops
    assert moved["slow_step"] <= -9 and moved["fast_step"] >= 2 and moved["slow_step"] + moved["fast_step"] == -7
    c = cause(a)
    assert c.kind == "indirect" and c.functions == ("slow_step", "fast_step")
    line = cause_line(c)
    assert line == (f"cause: indirect: no changed code ran; elsewhere -7, beyond the A/A floor 0 "
                    f"(slow_step {moved['slow_step']:.0f})")   # fast_step would pass 100 columns


def test_a_layout_cause_is_a_regression_only_beyond_the_band(built):
    from flagbench.stats.layout import BEYOND, WITHIN
    a = _attribution(built, "layout")
    assert cause(a, band=WITHIN).regression is False
    beyond = cause(a, band=BEYOND)
    assert beyond.kind == "layout" and beyond.regression and "beyond the layout band" in beyond.why


@pytest.mark.parametrize("variant", list(VARIANTS)[1:])
@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_every_line_fits_a_mail(built, variant, fmt):
    a = _attribution(built, variant)
    for line in [cause_line(cause(a), fmt), *attribution_lines(a, fmt)]:
        assert 0 < len(line) < 100 and "\n" not in line
    assert cause_line(cause(a), "json")["kind"] == cause(a).kind


def test_no_per_symbol_data_is_unknown():
    c = cause(None)
    assert c.kind == "unknown" and cause_line(c) == "cause: unknown: no per-symbol counts"


def test_names_match_across_asm_qualifiers_and_compiler_suffixes():
    a = attribute({"f.constprop.0": 10, "g": 5}, {"f.constprop.0": 4, "f.cold": 1, "g": 5}, ["x.o:f"], floor=0)
    assert [(d.name, d.delta) for d in a.changed] == [("f", -5)]


@pytest.mark.parametrize("bad", [
    dict(old={"f": float("nan")}, new={"f": 1}),
    dict(old={"f": 1}, new={"f": 2}, floor=-1),
    dict(old={1: 1}, new={"f": 2}),
])
def test_bad_input_is_refused(bad):
    with pytest.raises(ValueError):
        attribute(changed=[], **bad)


def test_parts_must_add_up():
    with pytest.raises(ValueError, match="add up"):
        Attribution("insns", 10, 20, (SymbolDelta("f", 1, 2),), (), 5)
    with pytest.raises(ValueError):
        Cause("regression", "x")
