"""Benches that run inside a variant's own kernel (`guest = true`): build the bench
programs statically for the target, pack them with flagbench's /init into an
initramfs, boot each variant's kernel once under qemu-system (run/guest/boot.py) and
turn what the guest measured into engine cells.

Per bench row (wis: mode x tasks; command: one row) the exact-counts table gets
  kernel_insns_per_iter, user_insns_per_iter   (instructions between the markers /
                                                iterations in the bracket)
and a second bench "NAME kernel profile" gets one row per kernel symbol (the top N
of any variant): "insns_per_iter:SYMBOL", attributed by the build's System.map.
The guest's own rate (ops/s) is emulated time under TCG: it goes to the provenance
(`guest_ops_per_s`, `guest_time` = "emulated"), never into a timed metric.

A variant's kernel is booted when the engine first runs one of its cells (once per
process; run/guest/boot.py), so a resumed run boots only the kernels whose rows it still lacks,
and Ctrl-C during a boot keeps every row already stored. Inside the guest each bench is
bounded by its own `timeout` (in guest seconds: init kills its process group and goes on),
a crash or a timeout fails that row alone, and a boot that dies or times out keeps the rows
whose results were already on the console. The A/A noise floor: the baseline kernel is
booted a second time with one more (ignored) kernel command line word, which moves where
timer interrupts land; the difference is what "exact" means across kernels.

What the counts cannot show: TCG has no cycle model. A REP string instruction counts
once per iteration plus once for the final count check: `rep movsq` of n qwords = n + 1
(sync_regs' 21-qword pt_regs copy: 8 + 22 = 30 per fault; clear_page_rep's 512-qword
`rep stosq`: 517), and an instruction that faults and restarts counts twice. So a change from `rep movsq` to an unrolled loop shows as
*more* instructions, whatever its speed on hardware (where a +17 % from such a change is
fast-string startup cost, not work): counts say what executed, not how long it took.

The run pipeline calls, for a kernel experiment:
    builds = kbuild.build_kernels(exp, extra_fragments=boot.boot_fragments(exp))
    cells += guest_cells(exp, benches, builds, workdir=workdir, notes=notes)
and hands the cells to run.engine.run_cells like any others (lines the boots add to
`notes` come while the cells run).
"""
from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from flagbench import procs
from flagbench.benchspec import MAX_TASKS, Bench, CommandBench, WisBench
from flagbench.errors import UserError
from flagbench.run.guest import boot as boots
from flagbench.run.guest.initramfs import guest_initramfs
from flagbench.kbuild.build import KernelBuild
from flagbench.metrics import KERNEL_INSNS_PER_ITER, USER_INSNS_PER_ITER, count
from flagbench.run.engine import BenchCell, Emit

KERNEL_DIR = Path(__file__).resolve().parent
GUEST_INIT_C, WIS_GUEST_C = KERNEL_DIR / "guest_init.c", KERNEL_DIR / "wis_guest.c"
GUEST_KINDS = ("wis", "command")
PROGRAM_CFLAGS = ("-static", "-O2", "-Wall", "-pthread")
PROFILE_TOP = 15
BOOT_SECONDS = 120              # wall-time allowance for booting and powering off, loaded machine
WALL_PER_GUEST_SECOND = 30       # a guest second is ~1 s of wall under TCG + plugin; 30x for a busy host
AA_WORD = "flagbench.aa=1"       # an unused command line word: perturbs timing only
REGION = re.compile(r"FB region iterations=(\d+) ns=(-?\d+)")   # the guest driver's line, in qemu or on a host
_BENCH = re.compile(r"FB bench (\S+) (start|exit=\S+|signal=\d+|timeout)")


@dataclass(frozen=True)
class GuestRow:
    """One measured row of a guest bench: a line of /benches and the row's params."""
    bench: str
    tag: str                       # the name the guest prints (unique per boot)
    params: dict
    line: str                      # the /benches line
    program: str                   # /bin/<program>
    budget: float                  # wall seconds the row may take under TCG
    timeout: float                 # guest seconds, after which init kills it

    @property
    def args(self) -> list[str]:
        """The program's arguments: the line is KIND, TAG, TIMEOUT_MS, PROGRAM, ARGS..."""
        return self.line.split("\t")[4:]


@dataclass
class RowResult:
    iterations: int = 0
    ns: int = 0
    kernel: int = 0
    user: int = 0
    profile: dict[str, int] = field(default_factory=dict)
    failure: str = ""
    ended: bool = False            # the guest printed how it ended

    def per_iter(self, value: int) -> float:
        return value / self.iterations if self.iterations else 0.0


@dataclass
class VariantBoot:
    variant: str
    result: boots.BootResult | None
    rows: dict[str, RowResult]     # tag -> result
    failure: str = ""              # the whole boot failed (with the console tail)


def region(output: str) -> tuple[int, int] | None:
    """(iterations, ns) of the first region line in a program's output, or None."""
    m = REGION.search(output)
    return (int(m.group(1)), int(m.group(2))) if m else None


def guest_benches(benches: Sequence[Bench]) -> list[Bench]:
    return [b for b in benches if b.guest]


def plan_rows(benches: Sequence[Bench], exp_dir: Path) -> tuple[list[GuestRow], dict[str, list[Path]]]:
    """The rows every variant's guest runs, and the static programs (name -> sources [+ -DTHREADS])."""
    rows, programs = [], {}
    for b in guest_benches(benches):
        timeout_ms = max(1, round(b.timeout * 1000))
        if isinstance(b, WisBench):
            testcase = Path(exp_dir, b.testcase)
            if not testcase.is_file():
                raise UserError(f"bench {b.name}: no testcase file {testcase}")
            warmup_ms = round(b.warmup_seconds * 1000)
            duration_ms = max(1, round(b.duration * 1000))
            for mode in b.modes:
                program = f"{testcase.stem}_{mode}"
                programs[program] = [testcase] + ([Path("-DTHREADS")] if mode == "threads" else [])
                for tasks in b.tasks:
                    tag = f"{b.name}.{mode}.{tasks}"
                    line = "\t".join(["self", tag, str(timeout_ms), f"/bin/{program}", str(tasks), str(warmup_ms),
                                      str(duration_ms)])
                    budget = WALL_PER_GUEST_SECOND * (warmup_ms + duration_ms) / 1000
                    rows.append(GuestRow(b.name, tag, {"mode": mode, "tasks": str(tasks)}, line, program, budget,
                                         b.timeout))
        elif isinstance(b, CommandBench):
            if not b.command[0].endswith(".c"):
                raise UserError(f"bench {b.name}: a guest command is [\"program.c\", \"arg\", ...]: the C file is "
                                "built statically into the guest (it has nothing else to run)")
            source = Path(exp_dir, b.command[0])
            program = source.stem
            programs[program] = [source]
            line = "\t".join(["wrap", b.name, str(timeout_ms), f"/bin/{program}", *b.command[1:]])
            rows.append(GuestRow(b.name, b.name, {}, line, program, b.timeout, b.timeout))
        else:
            raise UserError(f"bench {b.name}: kind {b.kind} cannot run in the guest yet "
                            f"(guest kinds: {', '.join(GUEST_KINDS)})")
    return rows, programs


def build_program(t: boots.Machine, name: str, sources: list[Path], out_dir: Path, driver: Path | None) -> Path:
    """A static executable for the guest, cached by its inputs."""
    cc = f"{t.cross}gcc"
    files = ([driver] if driver else []) + [s for s in sources if not str(s).startswith("-")]
    defines = [str(s) for s in sources if str(s).startswith("-")]
    if driver == WIS_GUEST_C:
        defines.append(f"-DMAX_TASKS={MAX_TASKS}")   # the driver's room: what the spec allows
    h = hashlib.sha256(" ".join([cc, *PROGRAM_CFLAGS, *defines]).encode())
    for f in files:
        h.update(f.read_bytes())
    exe = out_dir / f"{name}-{h.hexdigest()[:12]}"
    if exe.exists():
        return exe
    out_dir.mkdir(parents=True, exist_ok=True)
    argv = [cc, *PROGRAM_CFLAGS, *defines, f"-I{KERNEL_DIR}", "-o", f"{exe}.tmp", *map(str, files)]
    done = procs.run(argv, timeout=300)
    if done.failure:
        raise UserError(f"building guest program {name} for {t.name} failed: "
                        f"{(done.stderr.strip().splitlines() or [done.failure])[-1]}")
    Path(f"{exe}.tmp").replace(exe)
    return exe


def make_initramfs(t: boots.Machine, rows: list[GuestRow], programs: dict[str, list[Path]], workdir: Path) -> Path:
    bin_dir = workdir / "programs" / t.name
    init = build_program(t, "init", [], bin_dir, GUEST_INIT_C)
    built = {}
    for name, sources in programs.items():
        driver = WIS_GUEST_C if any(r.program == name and r.line.startswith("self") for r in rows) else None
        built[name] = build_program(t, name, sources, bin_dir, driver)
    data = guest_initramfs(init, built, "".join(r.line + "\n" for r in rows))
    path = workdir / f"initramfs-{t.name}-{hashlib.sha256(data).hexdigest()[:12]}.cpio"
    if not path.exists():
        path.write_bytes(data)
    return path


def parse_console(console: str, regions: list[boots.Region], rows: list[GuestRow]) -> dict[str, RowResult]:
    """Pair the guest's "FB region" lines (in order) with the plugin's regions (in order); a row
    is measured once the guest printed its region and its exit status 0."""
    results = {r.tag: RowResult(failure="the guest never started it") for r in rows}
    timeouts = {r.tag: r.timeout for r in rows}
    current, n_region = None, 0
    for line in console.splitlines():
        m = _BENCH.search(line)
        if m:
            tag, what = m.groups()
            if tag not in results:
                continue
            if what == "start":
                current = tag
                results[tag] = RowResult(failure="it did not finish")
                continue
            r, current = results[tag], None
            r.ended = True
            if what == "timeout":
                r.failure = f"timeout after {timeouts[tag]:g} s of guest time (killed in the guest)"
            elif what.startswith("signal="):
                r.failure = f"in the guest: {procs.signal_name(int(what[7:]))}"
            elif what != "exit=0":
                r.failure = f"in the guest: exit status {what[5:]}"
            elif not r.iterations:
                r.failure = "no measured region"
            continue
        m = REGION.search(line)
        if m and current in results:
            r = results[current]
            r.iterations, r.ns, r.failure = int(m.group(1)), int(m.group(2)), "it did not finish"
            if n_region < len(regions):
                region = regions[n_region]
                r.kernel, r.user, r.profile = region.kernel, region.user, region.profile
            else:
                r.failure = "the plugin recorded no region for it"
                r.iterations = 0
            n_region += 1
    if n_region < len(regions):   # a bench stopped between its stop marker and its region line
        for r in results.values():
            if r.iterations:
                r.failure, r.iterations = (f"the plugin recorded {len(regions)} regions, the console "
                                           f"{n_region}: they cannot be paired"), 0
    for r in results.values():
        if r.ended and r.failure == "it did not finish":
            r.failure = ""
    return results


def boot_variant(variant: str, t: boots.Machine, build: KernelBuild, initrd: Path, rows: list[GuestRow],
                 workdir: Path, settings: boots.BootSettings) -> VariantBoot:
    """Boot once; rows the guest finished keep their results even when the boot failed after them."""
    kernel = build.vmlinux if t.image == "vmlinux" else build.image
    result = boots.boot(t, Path(kernel), initrd, workdir=workdir, settings=settings,
                        system_map=build.system_map)
    rows_out = parse_console(result.console, result.regions, rows)
    for r in rows_out.values():
        if not r.ended and not result.ok:
            r.failure = f"{result.reason} ({r.failure}); console:\n{result.tail()}"
        elif r.failure:
            r.failure += f"; console:\n{result.tail()}"
    return VariantBoot(variant, result, rows_out)


def top_symbols(profiles: Sequence[dict[str, int]], n: int = PROFILE_TOP) -> list[str]:
    """The union of each profile's top n symbols, biggest first (by the first profile)."""
    chosen: list[str] = []
    for p in profiles:
        for sym, _ in sorted(p.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
            if sym not in chosen:
                chosen.append(sym)
    first = profiles[0] if profiles else {}
    return sorted(chosen, key=lambda s: (-first.get(s, 0), s))


def profile_table(a: RowResult, b: RowResult, names: tuple[str, str], n: int = PROFILE_TOP) -> list[str]:
    """Text lines: symbol, A and B kernel instructions per iteration, change."""
    lines = [f"{'symbol':32} {names[0]:>12} {names[1]:>12} {'change':>9}"]
    for sym in top_symbols([a.profile, b.profile], n):
        va, vb = a.per_iter(a.profile.get(sym, 0)), b.per_iter(b.profile.get(sym, 0))
        change = f"{(vb - va) / va * 100:+.1f}%" if va else "new"
        lines.append(f"{sym[:32]:32} {va:12.1f} {vb:12.1f} {change:>9}")
    lines.append(f"{'(kernel total)':32} {a.per_iter(a.kernel):12.1f} {b.per_iter(b.kernel):12.1f}")
    return lines


def _variant_name(build: KernelBuild) -> str:
    return build.cell.variant.name


def guest_cells(exp, benches: Sequence[Bench], kernel_builds: Sequence[KernelBuild], *, workdir: Path,
                notes: list[str] | None = None, settings: boots.BootSettings | None = None,
                profile_top: int = PROFILE_TOP, noise_floor: bool = True,
                booters: dict[str, "Booter"] | None = None) -> list[BenchCell]:
    """Engine cells for every guest bench row of every variant; a cell's job boots its
    variant's kernel with all guest benches when first needed (see Booter).

    `exp.root` is the experiment directory; `kernel_builds` are kbuild.build.KernelBuild
    (a failed build fails its cells). `notes` (if given) receives human-readable lines: boot
    settings now; the kernel profile diff of the first two variants and the A/A noise floor
    when those boots happen. `booters` (if given) receives each target's Booter.
    """
    notes = notes if notes is not None else []
    rows, programs = plan_rows(benches, Path(exp.root))
    if not rows:
        return []
    settings = settings or boots.BootSettings(timeout=BOOT_SECONDS + sum(r.budget for r in rows))
    by_target: dict[str, list[KernelBuild]] = {}
    for build in kernel_builds:
        by_target.setdefault(build.cell.target, []).append(build)
    cells = []
    for name, builds in by_target.items():
        t = boots.target(name)
        if t.why_not:
            notes.append(f"guest benches on {name}: not measured: {t.why_not}")
            continue
        if not t.verified:
            notes.append(f"guest benches on {name}: the qemu-system recipe ({' '.join(t.machine)}) was not "
                         "verified on flagbench's own machines yet; a failed boot shows the console")
        tdir = Path(workdir) / name
        initrd = make_initramfs(t, rows, programs, tdir)
        notes.append(f"guest: {t.name} under qemu-system {settings.accel}, icount shift={settings.icount_shift},"
                     f"sleep=off, rtc base {settings.rtc_base}; guest ops/s are emulated time: no timing verdict")
        booter = Booter(t, builds, rows, initrd, tdir, settings, noise_floor, notes, profile_top)
        if booters is not None:
            booters[name] = booter
        common = {"qemu": boots.qemu_version(t.qemu), "target": t.name,
                  "guest_time": "emulated" if settings.accel == "tcg" else "real", **settings.provenance()}
        cells += _cells(booter, common, settings, profile_top)
    return cells


class Booter:
    """The boots of one target's kernels, each done once, when a cell's job first asks for it:
    `get(variant)` for its rows, `floor(tag)` (the baseline booted twice), `symbols(tag)`
    (every variant: a profile's rows are the union of each variant's top symbols)."""

    def __init__(self, t: boots.Machine, builds: list[KernelBuild], rows: list[GuestRow], initrd: Path,
                 tdir: Path, settings: boots.BootSettings, noise_floor: bool, notes: list[str], top: int):
        self.t, self.rows, self.initrd, self.tdir, self.settings = t, rows, initrd, tdir, settings
        self.builds = {_variant_name(b): b for b in builds}
        self.baseline = _variant_name(builds[0])
        self.noise_floor, self.notes, self.top = noise_floor, notes, top
        self._boots: dict[str, VariantBoot] = {}
        # one boot per variant even when two lanes ask at once (a kexec host asks before it boots)
        self._lock = threading.RLock()
        self._noted: set[str] = set()

    def get(self, variant: str) -> VariantBoot:
        with self._lock:
            return self._get(variant)

    def _get(self, variant: str) -> VariantBoot:
        if variant not in self._boots:
            aa = variant == "aa"
            build = self.builds[self.baseline if aa else variant]
            if not build.ok:
                vb = VariantBoot(variant, None, {}, f"kernel build failed: {build.error or ''}")
            else:
                settings = replace(self.settings, append=(*self.settings.append, AA_WORD)) if aa else self.settings
                vb = boot_variant(variant, self.t, build, self.initrd, self.rows, self.tdir / f"boot-{variant}",
                                  settings)
            self._boots[variant] = vb
        return self._boots[variant]

    def panic(self, variant: str) -> str | None:
        """The panic line if VARIANT's kernel panicked under qemu (booted now if not yet): such
        a kernel is not kexec'd onto a real machine, where a panic takes the box down."""
        result = self.get(variant).result
        reason = result.reason if result is not None and not result.ok else ""
        return reason if reason.startswith("Kernel panic") else None

    def floor(self, tag: str) -> float | None:
        """|A/A difference| of kernel instructions per iteration, or None (not asked, not measured)."""
        if not self.noise_floor:
            return None
        x, y = self.get(self.baseline).rows.get(tag), self.get("aa").rows.get(tag)
        if not (x and y and not x.failure and not y.failure and x.iterations and y.iterations):
            return None
        value = abs(y.per_iter(y.kernel) - x.per_iter(x.kernel))
        self._note(f"floor {tag}", f"A/A noise floor, {tag}: {value:.2f} kernel instructions per iteration "
                                   f"(baseline booted twice, one extra ignored command-line word)")
        return value

    def symbols(self, tag: str) -> list[str]:
        measured = [vb.rows[tag] for vb in map(self.get, self.builds) if tag in vb.rows]
        variants = list(self.builds)
        if len(variants) >= 2:
            a, b = (self.get(v).rows.get(tag) for v in variants[:2])
            if a and b and not a.failure and not b.failure:
                lines = profile_table(a, b, (variants[0], variants[1]), self.top)
                self._note(f"profile {tag}", "\n  ".join([f"kernel profile, {tag}, instructions per iteration:",
                                                          *lines]))
        return top_symbols([r.profile for r in measured if not r.failure], self.top)

    def _note(self, key: str, text: str) -> None:
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(text)


def _cells(booter: Booter, common: dict, settings: boots.BootSettings, profile_top: int) -> list[BenchCell]:
    cells = []
    executor = f"qemu-system-{settings.accel}"
    for row in booter.rows:
        for variant, build in booter.builds.items():
            prov = {**common, **_kernel_provenance(build)}   # the job adds what its boot measured
            compiler, target = build.cell.compiler, booter.t.name
            cells.append(BenchCell(row.bench, variant, target, compiler, dict(row.params),
                                   counted=_counts_job(booter, variant, row.tag, prov),
                                   counted_metric="kernel_insns_per_iter", count_executor=executor,
                                   provenance=prov))
            if profile_top:   # its metrics are named by symbols only the boots know: no counted_metric
                cells.append(BenchCell(f"{row.bench} kernel profile", variant, target, compiler, dict(row.params),
                                       counted=_profile_job(booter, variant, row.tag),
                                       count_executor=executor, provenance=prov))
    return cells


def _measured(vb: VariantBoot, tag: str) -> tuple[RowResult | None, str | None]:
    """The row the guest measured, or why there is none (boot failure, bench failure, no loop)."""
    if vb.failure:
        return None, vb.failure
    r = vb.rows.get(tag)
    if r is None:
        return None, f"the guest printed no result for {tag}"
    if r.failure:
        return None, r.failure
    if not r.iterations:
        return None, "the guest counted 0 iterations in the measured region"
    return r, None


def _counts_job(booter: Booter, variant: str, tag: str, prov: dict):
    def job(emit: Emit) -> str | None:
        r, reason = _measured(booter.get(variant), tag)
        if r is None:
            return reason
        prov.update(guest_iterations=r.iterations, guest_ns=r.ns,
                    guest_ops_per_s=r.iterations * 1e9 / r.ns if r.ns > 0 else None,
                    # every symbol the bench ran, not only the profile's top rows: what a cause needs
                    # to tell a changed function that ran from one that did not (causes.py)
                    kernel_profile_per_iter={s: r.per_iter(n) for s, n in sorted(r.profile.items()) if n})
        if variant == booter.baseline:   # measured on the baseline: the other variants need not boot it
            prov["aa_noise_floor_kernel_per_iter"] = booter.floor(tag)
        emit(KERNEL_INSNS_PER_ITER, r.per_iter(r.kernel))
        emit(USER_INSNS_PER_ITER, r.per_iter(r.user))
        return None
    return job


def _profile_job(booter: Booter, variant: str, tag: str):
    """One exact metric per symbol, "insns_per_iter:SYMBOL": the report makes each its own
    row of the profile bench's exact-counts table (params.count)."""
    def job(emit: Emit) -> str | None:
        r, reason = _measured(booter.get(variant), tag)
        if r is None:
            return reason
        for sym in booter.symbols(tag):
            emit(count(f"insns_per_iter:{sym}"), r.per_iter(r.profile.get(sym, 0)))
        return None
    return job


def _kernel_provenance(build: KernelBuild) -> dict:
    config = build.config
    out = {}
    if config and Path(config).exists():
        text = Path(config).read_text(errors="replace")
        out["kernel_config_sha256"] = hashlib.sha256(text.encode()).hexdigest()[:16]
        m = re.search(r"Linux/\S+ (\S+) Kernel Configuration", text)
        if m:
            out["kernel_version"] = m.group(1)
    return out
