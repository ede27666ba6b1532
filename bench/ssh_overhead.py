"""What one `flagbench run --host` sample costs beyond the program, against ssh by hand.

    .venv/bin/python bench/ssh_overhead.py [--runs 200] [--host ALIAS]   # FLAGBENCH_SSH names the config

Without --host it starts the test suite's loopback OpenSSH server (tests/sshd_util.py). The
program is a static C `main` that returns 0 at once, so each time is all overhead. Side by
side, interleaved run by run (this machine is noisy), median and quartiles of:

  flagbench    one sample as `run --host` takes it: NativeExecutor on an SshHost place (the
               multiplexed connection, the guard, the program staged by content)
  by hand      `ssh -F CONFIG ALIAS /path/prog` (a new connection every time), as a user would
  by hand, mux the same through an OpenSSH ControlMaster the user keeps open (-S SOCKET)
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    q = statistics.quantiles(xs, n=4)
    return q[0], statistics.median(xs), q[2]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--host", help="an ssh destination (default: a loopback sshd started here)")
    args = ap.parse_args()

    from flagbench import procs
    from flagbench.run.executors import NativeExecutor
    from flagbench.hosts.remote import SshHost

    procs.install()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ssh-overhead-")))
        dest = args.host
        if dest is None:
            from sshd_util import sshd_server
            box = stack.enter_context(sshd_server(tmp / "box", alias="box"))
            os.environ["FLAGBENCH_SSH"] = box.ssh_env
            dest = "box"
        ssh = shlex.split(os.environ.get("FLAGBENCH_SSH", "ssh"))
        src = tmp / "nop.c"
        src.write_text("int main(void) { return 0; }\n")
        prog = tmp / "nop"
        subprocess.run(["gcc", "-O2", "-static", "-o", str(prog), str(src)], check=True)

        host = SshHost(dest).open()
        stack.callback(host.close)
        executor = NativeExecutor(place=host, parse_stdout=False)
        remote = host.stage(prog)           # by hand runs the very same file there
        sock = str(tmp / "mux")
        master = subprocess.Popen([*ssh, "-o", "ControlMaster=yes", "-o", f"ControlPath={sock}", "-N", dest])
        stack.callback(master.kill)
        while subprocess.run([*ssh, "-o", f"ControlPath={sock}", "-O", "check", dest],
                             capture_output=True).returncode:
            time.sleep(0.05)

        def flagbench_sample():
            m = executor.measure([str(prog)], target=host.machine(), timeout=60)
            assert m.ok, m.failure

        def by_hand():
            subprocess.run([*ssh, dest, remote], check=True)

        def by_hand_mux():
            subprocess.run([*ssh, "-o", f"ControlPath={sock}", dest, remote], check=True)

        ways = {"flagbench": flagbench_sample, "by hand": by_hand, "by hand, mux": by_hand_mux}
        times: dict[str, list[float]] = {k: [] for k in ways}
        for _ in range(args.runs):
            for name, fn in ways.items():
                t = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - t) * 1e3)
    base = statistics.median(times["by hand"])
    print(f"{args.runs} runs each, interleaved; ms per run of a static no-op program on {dest}")
    print(f"{'':<14} {'q1':>7} {'median':>7} {'q3':>7}  vs by hand")
    for name, xs in times.items():
        q1, med, q3 = quartiles(xs)
        print(f"{name:<14} {q1:7.2f} {med:7.2f} {q3:7.2f}  {med / base:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
