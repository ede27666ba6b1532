"""Running one harness program under a profiler: an exact profile per iteration (callgrind on
x86_64, qemu + the plugin's profile=FILE on the other targets, n and 2n iterations differenced),
or perf's time shares of a timed run (~0.5 s of `perf record -e cpu-clock`).

The program runs exactly as the instruction counts are taken (same argv, same fixed
environment). profile_experiment.py takes these over an experiment's builds and keeps them in
the store; report/profiles.py prints them.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from flagbench import procs
from flagbench import targets
from flagbench.errors import UserError
from flagbench.profile import (SymbolMap, attribute, parse_callgrind, parse_perf_script, parse_plugin_profile,
                               per_iteration)

HOST = targets.HOST.name     # callgrind and perf run here; other targets under qemu + the plugin
PERF_SECONDS = 0.5


# -- running ------------------------------------------------------------------------------------

def _argv(exe: Path, iters: int) -> list[str]:
    from flagbench.run.kinds.context import pad
    return [str(exe), "c", pad(iters)]


def _run(argv: list[str], timeout: float) -> procs.Done:
    from flagbench.run.executors import FIXED_CWD, FIXED_ENV
    done = procs.run(argv, timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV)
    if done.failure:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise UserError(f"{Path(argv[0]).name} {' '.join(argv[1:3])}...: {done.failure} {tail[0]}".rstrip())
    return done


def callgrind_counts(exe: Path, iters: int, tmp: Path, timeout: float) -> tuple[dict[str, int], int]:
    """Self Ir per function of one run under callgrind, and its total."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise UserError("exact profiles on x86_64 need valgrind: apt-get install valgrind")
    out = tmp / f"callgrind.{iters}"
    _run([valgrind, "-q", "--tool=callgrind", f"--callgrind-out-file={out}", "--cache-sim=no",
          "--branch-sim=no", "--compress-strings=no", "--compress-pos=no", *_argv(exe, iters)], timeout)
    selves, total = parse_callgrind(out.read_text(errors="replace"))
    if total is None:
        raise UserError(f"callgrind wrote no total for {exe.name}")
    return selves, total


def plugin_counts(exe: Path, target: str, iters: int, tmp: Path, timeout: float,
                  symbols: SymbolMap) -> tuple[dict[str, int], int]:
    """Instructions per symbol of one run under qemu + the plugin, and the plugin's own total."""
    from flagbench.run.qemu_plugin import plugin_path
    from flagbench.toolchains import get_target

    runner = shutil.which(get_target(target).qemu or "")
    if runner is None:
        raise UserError(f"profiles of {target} programs need qemu-user: apt-get install qemu-user")
    counts, profile = tmp / f"counts.{iters}", tmp / f"profile.{iters}"
    options = f"{plugin_path()},outfile={counts},mem=off,profile={profile}"
    _run([runner, *get_target(target).qemu_cpu, "-plugin", options, *_argv(exe, iters)], timeout)
    total = next((int(line.split()[1]) for line in counts.read_text().splitlines() if line.startswith("insns ")),
                 None)
    text = profile.read_text()
    if total is None or text.startswith("# incomplete"):
        raise UserError(f"the qemu plugin wrote no complete profile for {exe.name}")
    return attribute(parse_plugin_profile(text), symbols), total


def exact_profile(exe: Path, target: str, iters: int, tmp: Path, timeout: float) -> tuple[dict[str, float], float, str]:
    """(self per iteration by symbol, total per iteration, source): n and 2n iterations differenced."""
    if target == HOST:
        small, t_small = callgrind_counts(exe, iters, tmp, timeout)
        large, t_large = callgrind_counts(exe, 2 * iters, tmp, timeout)
        source = "callgrind"
    else:
        symbols = SymbolMap.of_elf(exe)
        small, t_small = plugin_counts(exe, target, iters, tmp, timeout, symbols)
        large, t_large = plugin_counts(exe, target, 2 * iters, tmp, timeout, symbols)
        source = "qemu-plugin"
    return per_iteration(small, large, iters), (t_large - t_small) / iters, source


def perf_profile(exe: Path, tmp: Path, timeout: float) -> tuple[dict[str, float], float] | str:
    """Samples per symbol of a ~0.5 s timed run under `perf record -e cpu-clock`, or why not."""
    from flagbench.run.executors import FIXED_CWD, FIXED_ENV, parse_metrics, perf_available
    perf = shutil.which("perf")
    if perf is None or not perf_available():
        return "perf does not work here (apt-get install linux-perf; kernel.perf_event_paranoid): no time profile"
    calibration, _ = parse_metrics(_run([str(exe)], timeout).stdout)   # one call of >= 20 ms: "iters N", "ns T"
    n = max(1, int(calibration.get("iters", 1) * PERF_SECONDS * 1e9 / max(calibration.get("ns", 1), 1)))
    data = tmp / "perf.data"
    done = procs.run([perf, "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", str(data), "--",
                      str(exe), "t", str(n)], timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV)
    if done.failure or not data.exists():
        return f"perf record failed ({done.failure or 'no data'}): no time profile"
    script = procs.run([perf, "script", "-i", str(data), "-F", "ip,sym"], timeout=timeout, env=FIXED_ENV)
    samples = parse_perf_script(script.stdout)
    if not samples:
        return "perf recorded no samples: no time profile"
    return dict(samples), float(sum(samples.values()))
