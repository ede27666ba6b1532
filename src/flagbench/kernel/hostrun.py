"""Guest benches on a real machine: each variant's kernel booted there by kexec, in rounds
A B B A A B ..., the bench programs run there as ordinary programs, real time.

Per round the variants go in the experiment's order, reversed every other round, so each
variant is booted `rounds` times and a drift of the machine hits them alike; boot-to-boot
variance is in the samples, not hidden (each sample records its boot and round). After
every kexec the running kernel must say the variant's build identity in /proc/version
(kbuild: KBUILD_BUILD_HOST = fb-HASH16), or the boot fails.

The programs are the guest's own (kernel/guest.py builds them statically): a will-it-scale
row runs `PROGRAM TASKS WARMUP_MS DURATION_MS` and prints "FB region iterations=N ns=NS"
from CLOCK_MONOTONIC there (the guest markers are no-ops on hardware), one `per_second`
sample; a command row is timed from flagbench's side of the connection (`seconds`,
including the ssh round trip, about a millisecond). Each row runs `samples` times per boot.

Samples go straight to the store (one transaction each) under the bench
"NAME on HOST (kexec)", beside the exact TCG counts of the same run, which stay under "NAME". Whatever happens
(a failure, Ctrl-C, SIGTERM) the host is kexec'd back into its own kernel before this
returns, and the run says so.
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from flagbench import procs
from flagbench.errors import UserError
from flagbench.hosts.ssh import Connection, HostError
from flagbench.kernel import boot as boots
from flagbench.kernel import guest
from flagbench.kernel.kexec import Kexec, Prepared
from flagbench.run.engine import BenchCell
from flagbench.run.places import target_of

_REGION = re.compile(r"FB region iterations=(\d+) ns=(\d+)")


@dataclass
class HostCell:
    bench: str                 # "NAME on HOST (kexec)"
    key: str                   # the store's cell key
    variant: str
    row: guest.GuestRow
    samples: int
    failure: str = ""
    taken: int = 0


def order(variants: Sequence[str], rounds: int) -> list[tuple[int, str]]:
    """(round, variant) in boot order: A B, B A, A B, ...

    >>> order(["A", "B"], 3)
    [(0, 'A'), (0, 'B'), (1, 'B'), (1, 'A'), (2, 'A'), (2, 'B')]
    """
    out = []
    for r in range(rounds):
        out += [(r, v) for v in (variants if r % 2 == 0 else list(reversed(variants)))]
    return out


def run_on_host(exp: Any, benches: Sequence[Any], builds: Sequence[Any], *, store, run_id: int, dest: str,
                rounds: int, workdir: Path, say: Callable[[str], None],
                prepared: Prepared | None = None) -> tuple[list[str], list[str]]:
    """Measure the guest benches on DEST by kexec into each build; (failures, notes).
    PREPARED: what kexec.for_host found there this run (else DEST is prepared here)."""
    rows, programs = guest.plan_rows(benches, Path(exp.root))
    if not rows:
        return [], []
    builds = [b for b in builds if b.ok]
    targets = {b.cell.target for b in builds}
    if len(targets) != 1:
        raise UserError(f"--host {dest}: one target at a time (the experiment builds {', '.join(sorted(targets))})")
    target = boots.target(targets.pop())
    by_variant = {b.cell.variant.name: b for b in builds}
    samples = {b.name: b.samples for b in benches}
    notes: list[str] = []
    with Connection(dest) as conn:
        k = Kexec(conn, say, prepared=prepared)
        if prepared is None:
            host = k.prepare()
        elif k.version() != prepared.host.version:   # its kernel changed while the variants built
            say(f"{dest} runs another kernel than at the start of the run: inspecting it again")
            host = k.prepare()
        else:
            host = prepared.host
        if target_of(host.machine) != target.name:
            raise UserError(f"--host {dest} is {host.machine}; the kernels are built for {target.name}")
        exe = {name: guest.build_program(target, name, sources, workdir / "programs",
                                         guest.WIS_GUEST_C if any(r.program == name and r.line.startswith("self")
                                                                  for r in rows) else None)
               for name, sources in programs.items()}
        cells = {(v, r.tag): HostCell(f"{r.bench} on {conn.name} (kexec)", _key(v, build, r), v, r, samples[r.bench])
                 for v, build in by_variant.items() for r in rows}
        done = store.finished_cells(run_id)
        if all((c.bench, c.key) in done for c in cells.values()):
            return [], [f"on {dest}: every cell was measured in run {run_id} already (--fresh to redo)"]
        notes.append(f"{dest}: {host.machine}, its own kernel {host.release}; variants booted there by kexec in "
                     f"{rounds} rounds, programs timed in real time")
        failures: list[str] = []
        try:
            for boot_no, (round_no, variant) in enumerate(order(list(by_variant), rounds)):
                build = by_variant[variant]
                mine = [c for (v, _), c in cells.items() if v == variant and not c.failure]
                if not mine:
                    continue
                say(f"round {round_no + 1}/{rounds}: kexec {dest} into {variant} ({build.identity})")
                try:
                    seconds = k.boot(build.image, _initrd(k), build.identity)
                except HostError as e:
                    failures.append(str(e))
                    for c in cells.values():
                        c.failure = c.failure or (f"boot {boot_no} (round {round_no}, {variant}): {e}" if c in mine
                                                  else f"not measured: boot {boot_no} ({variant}) failed first")
                    break
                version = k.running           # what it answered boot() with
                say(f"{dest} answers as {build.identity} {seconds:.1f} s after kexec")
                prov = {"host": dest, "boot": boot_no, "round": round_no, "kernel": version,
                        "kexec_seconds": round(seconds, 2), "identity": build.identity, "guest_time": "real"}
                for c in mine:
                    _measure(conn, store, run_id, c, exe[c.row.program], prov)
        finally:
            with procs.after_signal():    # Ctrl-C and SIGTERM too: the host goes back to its kernel
                try:
                    k.restore()
                except HostError as e:
                    failures.append(str(e))
                    say(str(e))
        for c in cells.values():
            if c.failure:
                store.finish_cell(run_id, c.bench, c.key, "failed", c.failure)
            else:
                store.finish_cell(run_id, c.bench, c.key, "ok")
        if not k.moved:
            notes.append(f"{dest} is back on its own kernel {host.release}")
    return failures, notes


def _initrd(k: Kexec) -> Path | None:
    """The host's own initramfs, for every variant (its root, its modules): kept by prepare()."""
    path = k.dir / "initrd.img"
    return path if path.exists() else None


def _key(variant: str, build: Any, row: guest.GuestRow) -> str:
    return BenchCell(row.bench, variant, build.cell.target, str(build.cell.compiler), dict(row.params)).key


def _measure(conn: Connection, store, run_id: int, c: HostCell, program: Path, prov: dict) -> None:
    remote = conn.stage(program)
    args = c.row.args
    for i in range(c.samples):
        timeout = max(60.0, c.row.budget)
        done = conn.run([remote, *args], timeout=timeout)
        if done.failure:
            c.failure = f"{c.row.tag} on boot {prov['boot']}: {done.failure}: {done.stderr.strip()[-200:]}"
            return
        sample = {**prov, "sample": c.taken, "sample_in_boot": i, "executor": f"kexec {conn.dest}",
                  "variant_column": c.variant, "time": time.time()}
        if c.row.line.startswith("self"):
            m = _REGION.search(done.stdout)
            if not m or int(m.group(2)) <= 0:
                c.failure = f"{c.row.tag}: no 'FB region' line in its output: {done.stdout.strip()[-200:]}"
                return
            iterations, ns = int(m.group(1)), int(m.group(2))
            sample.update(iterations=iterations, ns=ns)
            value, metric, unit = iterations * 1e9 / ns, "per_second", "iter/s"
        else:
            value, metric, unit = done.wall_ns / 1e9, "seconds", "s"
        store.add_samples(run_id, [(c.bench, c.key, metric, value, unit, f"kexec {conn.dest}", sample)])
        c.taken += 1
