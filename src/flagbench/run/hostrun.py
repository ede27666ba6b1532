"""Guest benches on a real machine: engine cells whose place boots kernels (hosts/factory.py:
a KexecHost, hosts/kexec.py, or a lab board's LabBootHost, hosts/lab_boot.py, which power
cycles it into each variant's image), so each variant's kernel is booted there and the bench
programs run there as ordinary programs, in real time. The run engine (run/engine.py) drives
them like any other cells: it visits the variants in rounds A B, B A, ... (enter() boots the
variant), stores every sample as it is taken, marks its contention, resumes a killed run where
it stopped and samples on with `--until`.

Each variant is booted `rounds` times and each row runs `samples` times per boot
(BenchCell.per_visit), so a drift of the machine hits the variants alike; boot-to-boot
variance is in the samples, not hidden (each sample records its boot). After every kexec the
running kernel must say the variant's build identity in /proc/version (kbuild:
KBUILD_BUILD_HOST = fb-HASH16), or the boot fails.

The programs are the guest's own (run/guest/guest.py builds them statically): a will-it-scale
row runs `PROGRAM TASKS WARMUP_MS DURATION_MS` and prints "FB region iterations=N ns=NS"
from CLOCK_MONOTONIC there (the guest markers are no-ops on hardware), one `per_second`
sample; a command row is timed from flagbench's side of the connection (`seconds`,
including the ssh round trip, about a millisecond).

Samples are stored under the bench "NAME on HOST (HOW)", HOW the place's `boot_kind` ("kexec",
"power cycle"), beside the exact TCG counts of the same run, which stay under "NAME".
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from flagbench.errors import UserError
from flagbench.run.guest import boot as boots
from flagbench.run.guest import guest
from flagbench.metrics import PER_SECOND, SECONDS
from flagbench.run.engine import BenchCell, Emit


def kexec_cells(exp: Any, benches: Sequence[Any], builds: Sequence[Any], host, *, rounds: int, workdir: Path,
                notes: list[str]) -> list[BenchCell]:
    """Cells of the guest benches timed on HOST (an opened kexec.KexecHost), one per variant
    and row; builds that failed have no cells there (their TCG cells say why)."""
    rows, programs = guest.plan_rows(benches, Path(exp.root))
    builds = [b for b in builds if b.ok]
    if not rows or not builds:
        return []
    if rounds < 1:
        raise UserError("--rounds must be at least 1")
    targets = {b.cell.target for b in builds}
    if len(targets) != 1:
        raise UserError(f"--host {host.dest}: one target at a time (the experiment builds {', '.join(sorted(targets))})")
    target = boots.target(targets.pop())
    if host.machine() != target.name:
        raise UserError(f"--host {host.dest} is {host.kernel.machine}; the kernels are built for {target.name}")
    exe = {name: guest.build_program(target, name, sources, workdir / "programs",
                                     guest.WIS_GUEST_C if any(r.program == name and r.line.startswith("self")
                                                              for r in rows) else None)
           for name, sources in programs.items()}
    samples = {b.name: b.samples for b in benches}
    how = host.boot_kind
    notes.append(f"{host.dest}: {host.kernel.machine}, its own kernel {host.kernel.release}; variants booted "
                 f"there by {how} in {rounds} rounds, programs timed in real time")
    cells = []
    for build in builds:
        for row in rows:
            self_timed = row.line.startswith("self")
            cells.append(BenchCell(f"{row.bench} on {host.name} ({how})", build.cell.variant.name, build.cell.target,
                                   str(build.cell.compiler), dict(row.params),
                                   timed=_job(host, row, exe[row.program]),
                                   timed_metric=(PER_SECOND if self_timed else SECONDS).name,
                                   samples=samples[row.bench] * rounds, per_visit=samples[row.bench], warmup=0,
                                   executor=f"{how} {host.dest}", place=host, boot=build,
                                   provenance={"guest_time": "real", "variant": build.cell.variant.name}))
    return cells


def _job(host, row: guest.GuestRow, program: Path):
    """One run of ROW's program on the booted host: its per_second (from its region line) or seconds."""
    def job(emit: Emit) -> str | None:
        done = host.run([host.stage(program), *row.args], timeout=max(60.0, row.budget))
        if done.failure:
            return f"{row.tag}: {done.failure}: {done.stderr.strip()[-200:]}"
        if not row.line.startswith("self"):
            emit(SECONDS, done.wall_ns / 1e9)
            return None
        region = guest.region(done.stdout)
        if region is None or region[1] <= 0:
            return f"{row.tag}: no 'FB region' line in its output: {done.stdout.strip()[-200:]}"
        iterations, ns = region
        emit(PER_SECOND, iterations * 1e9 / ns, facts={"iterations": iterations, "ns": ns})
        return None
    return job
