#!/usr/bin/env python3
"""flagbench size, in its default text format and in --format=bom, vs the kernel's bloat-o-meter,
side by side on the same pairs.

    .venv/bin/python bench/size_speed.py [--runs N] [--pair kernel|llvm|all] [--kernel DIR] [--base TREE]

Pairs: (1) DIR/vmlinux.old/.new (made by bench/make-kernel-pair; default the --big pair in
/work/kernel-pair-big when it is there, else /work/kernel-pair);
(2) two merged LLVM static archives, /work/llvm-pair/llvm14.a and llvm15.a, made here when
missing from Debian's llvm-14-dev and llvm-15-dev (`apt-get install -y --no-install-recommends
llvm-14-dev llvm-15-dev`) by an `ar -M` script that adds every libLLVM*.a.

Runs are interleaved (oracle, flagbench text, flagbench bom, oracle, ...); it prints the medians,
each format's ratio (with the 95 % interval of the ratio from the runs paired by round) and each tool's peak RSS (ru_maxrss of the largest process it ran: python,
nm, or flagbench's forked reader), and checks that bom printed the same bytes as the oracle. flagbench runs as users run it, through
its console script (`flagbench`, next to this Python), with its bytecode cached as an install
leaves it (PYTHONDONTWRITEBYTECODE is dropped from the environment, so the warm-up run writes
the .pyc files; otherwise every run would compile the modules again, ~15 ms).
With --base TREE (another flagbench checkout, its C extensions built in place by a Python that
has setuptools, which flagbench's venv does not keep: `git archive REV | tar -x -C TREE &&
python3 -m venv /tmp/bv && cd TREE && /tmp/bv/bin/python setup.py build_ext --inplace`) that tree's flagbench runs in
the same rounds, through its own bin/flagbench, so a change is measured against its base in one run.
The oracle is the 6.1 copy with upstream's weak-symbol types patched in
(the same change flagbench implements), so the outputs must be identical.
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORACLE = ROOT / ".cache" / "bloat-o-meter"
KERNEL_DIRS = (Path("/work/kernel-pair-big"), Path("/work/kernel-pair"))
LLVM_DIR = Path("/work/llvm-pair")


def current_oracle(tmp: Path) -> Path:
    text = ORACLE.read_text()
    for a, b in (('"Function", "tT")', '"Function", "tTwW")'), ('"Data", "dDbB")', '"Data", "dDbBvV")'),
                 ('"Data", "dDbBrR")', '"Data", "dDbBrRvV")'),
                 ('"Function", "tTdDbBrR")', '"Function", "tTdDbBrRvVwW")')):
        text = text.replace(a, b)
    out = tmp / "bloat-o-meter"
    out.write_text(text)
    return out


def llvm_pair() -> tuple[Path, Path]:
    LLVM_DIR.mkdir(parents=True, exist_ok=True)
    out = []
    for v in (14, 15):
        archive = LLVM_DIR / f"llvm{v}.a"
        if not archive.exists():
            libs = sorted(glob.glob(f"/usr/lib/llvm-{v}/lib/libLLVM*.a"))
            if not libs:
                sys.exit(f"no /usr/lib/llvm-{v}/lib/libLLVM*.a: apt-get install -y "
                         f"--no-install-recommends llvm-{v}-dev")
            script = f"create {archive}\n" + "".join(f"addlib {lib}\n" for lib in libs) + "save\nend\n"
            subprocess.run(["ar", "-M"], input=script, text=True, check=True)
        out.append(archive)
    return out[0], out[1]


def flagbench_argv() -> list[str]:
    script = Path(sys.executable).parent / "flagbench"
    return [str(script)] if script.exists() else [sys.executable, "-m", "flagbench"]


def timed(argv: list[str], pythonpath: str | None = None) -> tuple[float, float, int, bytes]:
    """Wall time, CPU time (user + system, all processes), peak RSS (KB) of the largest process,
    stdout. CPU time is the figure a busy machine disturbs least (wall time counts the waits
    for a core; a tool that uses two cores gains nothing on a machine with none free)."""
    # ru_maxrss of RUSAGE_CHILDREN is the maximum over all children so far: run each
    # measurement in a fresh intermediate process so the numbers do not mix.
    code = ("import resource,subprocess,sys,time,os;t=time.perf_counter();"
            "p=subprocess.run(sys.argv[1:],stdout=subprocess.PIPE,stderr=subprocess.DEVNULL);"
            "d=time.perf_counter()-t;u=resource.getrusage(resource.RUSAGE_CHILDREN);"
            "os.write(2,b'%f %f %d\\n'%(d,u.ru_utime+u.ru_stime,u.ru_maxrss));sys.stdout.buffer.write(p.stdout)")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    p = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, check=True, env=env)
    wall, cpu, rss = p.stderr.split()[-3:]
    return float(wall), float(cpu), int(rss), p.stdout


def bench(name: str, old: Path, new: Path, runs: int, oracle: Path, base: Path | None = None) -> None:
    tools = {
        "bloat-o-meter": [sys.executable, str(oracle), str(old), str(new)],
        "flagbench text": [*flagbench_argv(), "size", str(old), str(new)],
        "flagbench bom": [*flagbench_argv(), "size", "--format=bom", str(old), str(new)],
    }
    paths = {}
    if base:
        script = [sys.executable, str(base / "bin" / "flagbench"), "size"]
        tools["base text"] = [*script, str(old), str(new)]
        tools["base bom"] = [*script, "--format=bom", str(old), str(new)]
        paths = {"base text": str(base / "src"), "base bom": str(base / "src")}
    times = {k: [] for k in tools}
    cpus = {k: [] for k in tools}
    rss = {k: 0 for k in tools}
    outputs = {}
    for k, argv in tools.items():   # warm the page cache and the bytecode
        timed(argv, paths.get(k))
    for _ in range(runs):
        for k, argv in tools.items():
            t, c, r, out = timed(argv, paths.get(k))
            times[k].append(t)
            cpus[k].append(c)
            rss[k] = max(rss[k], r)
            outputs[k] = out
    same = outputs["bloat-o-meter"] == outputs["flagbench bom"]
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu = {k: statistics.median(v) for k, v in cpus.items()}
    print(f"{name}: {old} vs {new}, {runs} interleaved runs each")
    for k in tools:
        ratio = "" if k == "bloat-o-meter" else (f"  {med['bloat-o-meter'] / med[k]:.2f}x faster "
                                                 f"{_interval(times[k], times['bloat-o-meter'])}"
                                                 f"(CPU {cpu['bloat-o-meter'] / cpu[k]:.2f}x; goal >= 10)")
        print(f"  {k:14s} median {med[k]:.3f} s  (min {min(times[k]):.3f}, max {max(times[k]):.3f}), "
              f"CPU {cpu[k]:.3f} s, peak RSS {rss[k] / 1024:.0f} MB{ratio}")
    print(f"  bom output identical to bloat-o-meter's: {'yes' if same else 'NO'}")
    if base:
        for fmt in ("text", "bom"):
            print(f"  {fmt}: this tree takes {med['flagbench ' + fmt] / med['base ' + fmt]:.3f} of base's median time "
                  f"{_interval(times['base ' + fmt], times['flagbench ' + fmt], 3)}"
                  f"(output {'identical' if outputs['flagbench ' + fmt] == outputs['base ' + fmt] else 'DIFFERENT'})")


def _interval(old: list[float], new: list[float], digits: int = 2) -> str:
    """new/old from the runs paired by round (they were interleaved, so a round's two runs saw the
    same machine): the Hodges-Lehmann estimate and its 95 % interval, flagbench's own statistics
    (`stats.ranks`); it need not equal the ratio of the medians printed before it."""
    from flagbench.stats.ranks import paired_ratio_interval
    found = paired_ratio_interval(old, new)
    return "" if found is None else (f"(paired {found[0]:.{digits}f}, 95 % {found[1]:.{digits}f}-"
                                     f"{found[2]:.{digits}f}) ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--pair", choices=("kernel", "llvm", "all"), default="all")
    ap.add_argument("--kernel", type=Path, help="directory with vmlinux.old and vmlinux.new")
    ap.add_argument("--base", type=Path, help="another flagbench tree (extensions built) to measure alongside")
    args = ap.parse_args()
    kdir = args.kernel or next((d for d in KERNEL_DIRS if (d / "vmlinux.new").exists()), KERNEL_DIRS[0])
    kernel = (kdir / "vmlinux.old", kdir / "vmlinux.new")
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        oracle = current_oracle(Path(tmp))
        if args.pair in ("kernel", "all"):
            if all(p.exists() for p in kernel):
                bench("kernel", *kernel, args.runs, oracle, args.base)
            else:
                print("kernel pair missing: run bench/make-kernel-pair (about 20 minutes)")
        if args.pair in ("llvm", "all"):
            bench("llvm", *llvm_pair(), args.runs, oracle, args.base)


if __name__ == "__main__":
    main()
