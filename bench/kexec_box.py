#!/usr/bin/env python3
"""Boot the kexec test box (tests/testbox_util.py) and run `flagbench run EXP --host box`
against it, twice (the second with --fresh: the kernels come from the cache), printing each
run's wall time and its kexec lines; the numbers README's "On a real machine" quotes.

    .venv/bin/python bench/kexec_box.py [--rounds 2] [EXP]      # EXP default: the test's experiment
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

from testbox_util import booted_box  # noqa: E402
from test_kexec import _experiment  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", nargs="?")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kexec-box-") as tmp:
        tmp = Path(tmp)
        exp = Path(args.experiment) if args.experiment else _experiment()
        started = time.monotonic()
        with booted_box(tmp / "box") as box:
            print(f"box up in {time.monotonic() - started:.1f} s (qemu start to ssh answering): {box.version()}")
            env = {**os.environ, "FLAGBENCH_SSH": box.ssh_env, "PYTHONPATH": str(ROOT / "src")}
            for extra in ([], ["--fresh"]):
                argv = [sys.executable, "-m", "flagbench", "run", str(exp), "--host", "box", "--rounds",
                        str(args.rounds), "--db", str(tmp / "fb.db"), *extra]
                t = time.monotonic()
                done = subprocess.run(argv, env=env, capture_output=True, text=True)
                print(f"\n$ flagbench run EXP --host box --rounds {args.rounds} {' '.join(extra)}"
                      f"   # exit {done.returncode}, {time.monotonic() - t:.1f} s")
                for line in done.stderr.splitlines():
                    if any(w in line for w in ("kexec", "answers", "back on", "restoring", "round", "cached")):
                        print(line)
                print(done.stdout)
            print(f"box after the runs: {box.version()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
