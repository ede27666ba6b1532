"""Boot a built kernel with an initramfs under qemu-system and collect what the guest
measured: the console, and the syscount plugin's per-region counts and kernel profile.

One qemu-system machine per target (`targets.Boot`, on each Target: the -M line, console, which kernel
file, where the kernel's addresses start, the marker bytes). Counts repeat bit for bit only with a fixed
instruction clock: `-icount shift=N,sleep=off -rtc clock=vm,base=<fixed date>`;
the shift changes kernel counts (timer ticks per instruction), so A and B must use
the same one, and the provenance says which.

Every qemu runs under flagbench.procs: its own session, dies with flagbench
(PR_SET_PDEATHSIG), killed with its group on timeout, Ctrl-C, SIGTERM or SIGHUP. A panic, a timeout, or a boot that
never reaches "FB done" is a failed boot carrying the console's last lines.
"""
from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from flagbench import procs
from flagbench.errors import UserError
from flagbench.kbuild.config import boot_fragment, boot_fragments  # noqa: F401 (the guest's own fragments)
from flagbench.run import qemu_plugin
from flagbench.targets import TARGETS, Boot

RTC_BASE = "2024-01-01T00:00:00"
TAIL_LINES = 15


Machine = Boot     # a target's qemu-system recipe lives on its Target (targets.py)


@dataclass(frozen=True)
class BootSettings:
    icount_shift: int = 4
    rtc_base: str = RTC_BASE
    accel: str = "tcg"             # counts need TCG: plugins do not run under KVM
    smp: int = 1
    timeout: float = 180.0
    append: tuple[str, ...] = ()   # extra kernel command line words

    def provenance(self) -> dict:
        return {"accel": self.accel, "icount": f"shift={self.icount_shift},sleep=off",
                "rtc": f"clock=vm,base={self.rtc_base}", "smp": self.smp}


@dataclass(frozen=True)
class Region:
    index: int
    kernel: int
    user: int
    profile: dict[str, int]        # kernel symbol -> instructions ("?" = no symbol)


@dataclass
class BootResult:
    ok: bool
    reason: str                    # why not ok ("" when ok)
    console: str
    regions: list[Region] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)   # pre / kernel / user of the whole boot
    seconds: float = 0.0
    argv: list[str] = field(default_factory=list)

    def tail(self, n: int = TAIL_LINES) -> str:
        return console_tail(self.console, n)


def console_tail(console: str, n: int = TAIL_LINES) -> str:
    lines = [line.rstrip("\r") for line in console.splitlines() if line.strip()]
    return "\n".join(lines[-n:])


def target(name: str) -> Boot:
    """The qemu-system recipe of target NAME (bad input when it has none)."""
    t = TARGETS.get(name)
    if t is None or t.boot is None:
        known = ", ".join(n for n, t in TARGETS.items() if t.boot)
        raise UserError(f"no qemu-system recipe for target {name!r} (known: {known})")
    return t.boot


def qemu_version(binary: str) -> str:
    if shutil.which(binary) is None:
        raise UserError(f"{binary} not found: apt-get install qemu-system-x86 (or -arm, -misc)")
    out = procs.run([binary, "--version"], timeout=30).stdout
    return out.splitlines()[0].strip() if out else binary


def qemu_argv(t: Machine, kernel: Path, initrd: Path, console_log: Path, settings: BootSettings,
              plugin_args: str | None) -> list[str]:
    append = [f"console={t.console}", "panic=-1", *settings.append]   # full console: a hang shows where
    argv = [t.qemu, *t.machine, "-m", t.memory, "-smp", str(settings.smp), "-nodefaults", "-display", "none",
            "-no-reboot", "-serial", f"file:{console_log}", "-kernel", str(kernel), "-initrd", str(initrd),
            "-append", " ".join(append)]
    if settings.accel == "kvm":
        argv += ["-accel", "kvm"]
    else:
        argv += ["-accel", "tcg", "-icount", f"shift={settings.icount_shift},sleep=off",
                 "-rtc", f"clock=vm,base={settings.rtc_base}"]
    if plugin_args:
        argv += ["-plugin", plugin_args]
    return argv


def boot(t: Machine, kernel: Path, initrd: Path, *, workdir: Path, settings: BootSettings = BootSettings(),
         system_map: Path | None = None, count: bool = True) -> BootResult:
    """Boot once; the result says whether the guest reached "FB done" and what it measured."""
    if t.why_not and count:
        raise UserError(f"target {t.name} cannot be measured here: {t.why_not}")
    workdir.mkdir(parents=True, exist_ok=True)
    console_log, counts, errors = workdir / "console.log", workdir / "counts.txt", workdir / "qemu.stderr"
    for stale in (console_log, counts):
        stale.unlink(missing_ok=True)
    plugin_args = None
    if count and settings.accel == "tcg":
        plugin_args = (f"{qemu_plugin.plugin_path('syscount')},outfile={counts},kernel_base={t.kernel_base:x},"
                       f"start={t.marker_start},stop={t.marker_stop}")
        if system_map is not None:
            plugin_args += f",symbols={system_map}"
    argv = qemu_argv(t, kernel, initrd, console_log, settings, plugin_args)
    started = time.monotonic()
    with open(errors, "wb") as err:
        # own session, PDEATHSIG, group killed on timeout, signal or exception (flagbench.procs)
        code = procs.start(argv, stdout=err, stderr=err).wait(timeout=settings.timeout)
    reason = f"timeout after {settings.timeout:g} s" if code is None else ""
    seconds = time.monotonic() - started
    console = console_log.read_text(errors="replace") if console_log.exists() else ""
    stderr = errors.read_text(errors="replace").strip()
    if not reason:
        reason = _failure(code, console, stderr)
    result = BootResult(not reason, reason, console, seconds=seconds, argv=argv)
    if counts.exists():
        result.regions, result.totals = parse_counts(counts.read_text())
    return result


def _failure(returncode: int, console: str, stderr: str) -> str:
    panic = re.search(r"Kernel panic - not syncing:[^\n]*", console)
    if panic:
        return panic.group(0).strip()
    if returncode != 0:
        last = stderr.splitlines()[-1] if stderr else ""
        return f"qemu exit status {returncode}" + (f": {last}" if last else "")
    if not re.search(r"FB done", console):
        return "the guest stopped before finishing its benches (no 'FB done' on the console)"
    return ""


def parse_counts(text: str) -> tuple[list[Region], dict[str, int]]:
    """The plugin's output file: regions in order, and the last whole-boot totals."""
    regions, totals = [], {}
    current = None
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "region":
            current = Region(int(f[1]), int(f[3]), int(f[5]), {})
        elif f[0] == "sym" and current is not None:
            current.profile[f[2]] = current.profile.get(f[2], 0) + int(f[3])
        elif f[0] == "end" and current is not None:
            regions.append(current)
            current = None
        elif f[0] == "total":
            totals = {f[i]: int(f[i + 1]) for i in range(1, len(f) - 1, 2)}
    return regions, totals
