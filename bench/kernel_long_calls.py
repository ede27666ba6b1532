#!/usr/bin/env python3
"""The bundled hppa kernel pair (cases/kernel-long-calls: tinyconfig, default vs -mlong-calls)
held to what tests/test_stubs.py holds small linked programs to: no function gets more
instruction lines than objdump shows inside its symbol, the linker's long-branch stubs are
counted in both builds' asm and size (8 bytes each), -mlong-calls leaves next to none, and
size's code bytes add up. Moved out of `make test`: two cold hppa kernels are ~20 minutes of a
fresh 2-core machine, over the suite's budget (issue 44); the small links stay in the suite.

    .venv/bin/python bench/kernel_long_calls.py        # builds (or finds cached) the pair

Exit 0 when every check holds, 1 naming the first that does not.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from conftest import flagbench  # noqa: E402
from kernel_util import missing_tools  # noqa: E402
from test_stubs import _overruns  # noqa: E402

from flagbench import spec  # noqa: E402
from flagbench.kbuild.build import build_kernels  # noqa: E402


def check(ok: bool, what: str) -> None:
    print(f"{'ok  ' if ok else 'FAIL'} {what}")
    if not ok:
        raise SystemExit(1)


def main() -> int:
    if missing_tools():
        print(f"kernel build needs {', '.join(missing_tools())} (scripts/install-deps)", file=sys.stderr)
        return 2
    exp = spec.load(ROOT / "cases" / "kernel-long-calls")
    old, new = build_kernels(exp, None, jobs=2, progress=True)
    check(old.ok and new.ok, f"both built ({old.error or ''}{new.error or ''})")
    for build in (old, new):
        over = _overruns(build.vmlinux, "hppa-linux-gnu-objdump")
        check(over == [], f"{build.cell.variant.name}: no function past its extent {over[:5]}")
    out = json.loads(flagbench("asm", old.vmlinux, new.vmlinux, "--format", "json").stdout)
    u_old, u_new = out["unsized"]["old"], out["unsized"]["new"]
    check(u_old["stubs"] > 100 and u_old["stub"] == 8 * u_old["stubs"], f"default: {u_old['stubs']} stubs of 8 bytes")
    check(u_new["stubs"] < u_old["stubs"] // 100, f"-mlong-calls: {u_new['stubs']} stubs")
    check(out["total"]["old"]["calls"]["through_stubs"] > u_old["stubs"] > 0, "default: calls through the stubs")
    check(out["total"]["new"]["calls"]["through_stubs"] == 0, "-mlong-calls: no call through a stub")
    s = json.loads(flagbench("size", old.vmlinux, new.vmlinux, "--format", "json").stdout)
    check((s["stubs"]["old"], s["stub_bytes"]["old"]) == (u_old["stubs"], u_old["stub"]), "size says what asm says")
    parts = (s["padding"]["old"] + s["fill"]["old"] + s["stub_bytes"]["old"] + s["other_unsized"]["old"]
             + s["in_symbols"]["old"])
    check(parts == s["code"]["old"], f"code bytes add up ({parts} of {s['code']['old']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
