"""What the ssh guard's scan for leftover processes costs per sample (README, --host).

    .venv/bin/python bench/guard_cost.py [N]

Starts a throwaway sshd on 127.0.0.1 (tests/sshd_util.py), opens one Connection and runs
`true` there N times (default 40) with the guard as shipped and N times with its scan made a
no-op, alternating sample by sample so load drifts hit both alike; prints median and IQR.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from sshd_util import sshd_server  # noqa: E402

from flagbench import procs  # noqa: E402
from flagbench.hosts import ssh  # noqa: E402

NO_SCAN = ssh.GUARD.replace("end() {", "end() { L=0; S=0; return\n", 1)


def main(n: int) -> None:
    procs.install()
    times: dict[str, list[float]] = {"scan": [], "no scan": []}
    with tempfile.TemporaryDirectory() as tmp, sshd_server(Path(tmp) / "box", alias="box") as box:
        os.environ["FLAGBENCH_SSH"] = box.ssh_env
        with ssh.Connection("box") as conn:
            conn.run(["true"], timeout=20)
            shipped = ssh.GUARD
            for _ in range(n):
                for name, guard in (("scan", shipped), ("no scan", NO_SCAN)):
                    ssh.GUARD = guard
                    start = time.perf_counter()
                    done = conn.run(["true"], timeout=20)
                    times[name].append((time.perf_counter() - start) * 1e3)
                    assert done.returncode == 0, done
            ssh.GUARD = shipped
    for name, xs in times.items():
        q = statistics.quantiles(xs, n=4)
        print(f"{name:8} median {statistics.median(xs):6.1f} ms  IQR {q[0]:.1f}-{q[2]:.1f}  n={len(xs)}")
    print(f"load {os.getloadavg()[0]:.2f}, {sum(1 for p in os.listdir('/proc') if p.isdigit())} processes")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
