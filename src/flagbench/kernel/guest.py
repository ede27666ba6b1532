"""Benches that run inside a variant's own kernel (`guest = true`): build the bench
programs statically for the target, pack them with flagbench's /init into an
initramfs, boot each variant's kernel once under qemu-system (kernel/boot.py) and
turn what the guest measured into engine cells.

Per bench row (wis: mode x tasks; command: one row) the exact-counts table gets
  kernel_insns_per_iter, user_insns_per_iter   (instructions between the markers /
                                                iterations in the bracket)
and a second bench "NAME kernel profile" gets one row per kernel symbol (the top N
of any variant): "insns_per_iter:SYMBOL", attributed by the build's System.map.
The guest's own rate (ops/s) is emulated time under TCG: it goes to the provenance
(`guest_ops_per_s`, `guest_time` = "emulated"), never into a timed metric.

Booting happens once per variant in `guest_cells` (a few seconds each under TCG);
the cells' jobs hand the parsed numbers to the engine, or fail with the boot's
reason and the console's last lines. The A/A noise floor: the baseline kernel is
booted a second time with one more (ignored) kernel command line word, which moves
where timer interrupts land; the difference is what "exact" means across kernels.

What the counts cannot show: TCG has no cycle model. A REP string instruction counts
once per iteration plus once for the final count check: `rep movsq` of n qwords = n + 1
(sync_regs' 21-qword pt_regs copy: 8 + 22 = 30 per fault; clear_page_rep's 512-qword
`rep stosq`: 517), and an instruction that faults and restarts counts twice. So a change from `rep movsq` to an unrolled loop shows as
*more* instructions, whatever its speed on hardware (fast-string startup cost is what
the seed's +17 % is about): counts say what executed, not how long it took.

The run pipeline calls, for a kernel experiment:
    builds = kbuild.build_kernels(exp, extra_fragments=[boot.boot_fragment(t) for t in exp targets])
    cells += guest_cells(exp, benches, builds, workdir=workdir, notes=notes)
and hands the cells to run.engine.run_cells like any others.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from flagbench import procs
from flagbench.benchspec import MAX_TASKS
from flagbench.errors import UserError
from flagbench.kernel import boot as boots
from flagbench.kernel.initramfs import guest_initramfs
from flagbench.run.engine import BenchCell, Emit

KERNEL_DIR = Path(__file__).resolve().parent
GUEST_INIT_C, WIS_GUEST_C = KERNEL_DIR / "guest_init.c", KERNEL_DIR / "wis_guest.c"
GUEST_KINDS = ("wis", "command")
PROGRAM_CFLAGS = ("-static", "-O2", "-Wall", "-pthread")
PROFILE_TOP = 15
BOOT_SECONDS = 120              # wall-time allowance for booting and powering off, loaded machine
WALL_PER_GUEST_SECOND = 30       # a guest second is ~1 s of wall under TCG + plugin; 30x for a busy host
AA_WORD = "flagbench.aa=1"       # an unused command line word: perturbs timing only
_REGION = re.compile(r"FB region iterations=(\d+) ns=(-?\d+)")
_BENCH = re.compile(r"FB bench (\S+) (start|exit=\S+|signal=\d+)")


def _get(obj: Any, key: str, default=None):
    """A bench or build field, whether spec hands out dicts or dataclasses."""
    if isinstance(obj, dict):
        return obj.get(key, default)
    return getattr(obj, key, default)


@dataclass(frozen=True)
class GuestRow:
    """One measured row of a guest bench: a line of /benches and the row's params."""
    bench: str
    tag: str                       # the name the guest prints (unique per boot)
    params: dict
    line: str                      # the /benches line
    program: str                   # /bin/<program>
    budget: float                  # wall seconds the row may take under TCG


@dataclass
class RowResult:
    iterations: int = 0
    ns: int = 0
    kernel: int = 0
    user: int = 0
    profile: dict[str, int] = field(default_factory=dict)
    failure: str = ""

    def per_iter(self, value: int) -> float:
        return value / self.iterations if self.iterations else 0.0


@dataclass
class VariantBoot:
    variant: str
    result: boots.BootResult | None
    rows: dict[str, RowResult]     # tag -> result
    failure: str = ""              # the whole boot failed (with the console tail)


def guest_benches(benches: Sequence[Any]) -> list[Any]:
    return [b for b in benches if _get(b, "guest", False)]


def plan_rows(benches: Sequence[Any], exp_dir: Path) -> tuple[list[GuestRow], dict[str, list[Path]]]:
    """The rows every variant's guest runs, and the static programs (name -> sources [+ -DTHREADS])."""
    rows, programs = [], {}
    for b in guest_benches(benches):
        name, kind = _get(b, "name"), _get(b, "kind")
        if kind == "wis":
            testcase = Path(exp_dir, _get(b, "testcase"))
            if not testcase.is_file():
                raise UserError(f"bench {name}: no testcase file {testcase}")
            warmup_ms = round(float(_get(b, "warmup_seconds", 0.1) or 0) * 1000)
            duration_ms = max(1, round(float(_get(b, "duration", 0.5)) * 1000))
            for mode in _get(b, "modes", None) or ("processes",):
                program = f"{testcase.stem}_{mode}"
                programs[program] = [testcase] + ([Path("-DTHREADS")] if mode == "threads" else [])
                for tasks in _get(b, "tasks", None) or (1,):
                    tag = f"{name}.{mode}.{tasks}"
                    line = "\t".join(["self", tag, f"/bin/{program}", str(tasks), str(warmup_ms), str(duration_ms)])
                    budget = WALL_PER_GUEST_SECOND * (warmup_ms + duration_ms) / 1000
                    rows.append(GuestRow(name, tag, {"mode": mode, "tasks": str(tasks)}, line, program, budget))
        elif kind == "command":
            command = _get(b, "command")
            if not command or not str(command[0]).endswith(".c"):
                raise UserError(f"bench {name}: a guest command is [\"program.c\", \"arg\", ...]: the C file is "
                                "built statically into the guest (it has nothing else to run)")
            source = Path(exp_dir, command[0])
            program = source.stem
            programs[program] = [source]
            line = "\t".join(["wrap", name, f"/bin/{program}", *map(str, command[1:])])
            rows.append(GuestRow(name, name, {}, line, program, float(_get(b, "timeout", 300.0))))
        else:
            raise UserError(f"bench {name}: kind {kind} cannot run in the guest yet "
                            f"(guest kinds: {', '.join(GUEST_KINDS)})")
    return rows, programs


def build_program(t: boots.Target, name: str, sources: list[Path], out_dir: Path, driver: Path | None) -> Path:
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


def make_initramfs(t: boots.Target, rows: list[GuestRow], programs: dict[str, list[Path]], workdir: Path) -> Path:
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
    """Pair the guest's "FB region" lines (in order) with the plugin's regions (in order)."""
    results = {r.tag: RowResult(failure="the guest never started it") for r in rows}
    current, n_region = None, 0
    for line in console.splitlines():
        m = _BENCH.search(line)
        if m:
            tag, what = m.groups()
            if what == "start":
                current = tag
                results[tag] = RowResult(failure="no measured region")
            else:   # it ended: a non-zero exit or a signal fails it, whatever it measured
                if tag in results and what != "exit=0":
                    results[tag].failure = f"in the guest: {what}"
                current = None
            continue
        m = _REGION.search(line)
        if m and current in results:
            r = results[current]
            r.iterations, r.ns, r.failure = int(m.group(1)), int(m.group(2)), ""
            if n_region < len(regions):
                region = regions[n_region]
                r.kernel, r.user, r.profile = region.kernel, region.user, region.profile
            else:
                r.failure = "the plugin recorded no region for it"
            n_region += 1
    return results


def boot_variant(variant: str, t: boots.Target, build: Any, initrd: Path, rows: list[GuestRow], workdir: Path,
                 settings: boots.BootSettings) -> VariantBoot:
    kernel = Path(_get(build, "vmlinux") if t.image == "vmlinux" else _get(build, "image"))
    result = boots.boot(t, kernel, initrd, workdir=workdir, settings=settings,
                        system_map=Path(_get(build, "system_map")))
    if not result.ok:
        return VariantBoot(variant, result, {}, f"{result.reason}; console:\n{result.tail()}")
    rows_out = parse_console(result.console, result.regions, rows)
    for r in rows_out.values():
        if r.failure:
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


def _variant_name(build: Any) -> str:
    cell = _get(build, "cell")
    variant = _get(cell, "variant")
    return str(_get(variant, "name", variant))


def guest_cells(exp: Any, benches: Sequence[Any], kernel_builds: Sequence[Any], *, workdir: Path,
                notes: list[str] | None = None, settings: boots.BootSettings | None = None,
                profile_top: int = PROFILE_TOP, noise_floor: bool = True, progress: bool = True) -> list[BenchCell]:
    """Boot every variant's kernel once with all guest benches; engine cells for their rows.

    `exp` gives the experiment directory (`exp.root`, `exp.dir` or `exp.path`);
    `kernel_builds` are kernel.kbuild.KernelBuild (a failed build fails its cells).
    `notes` (if given) receives human-readable lines: boot settings, the kernel profile
    diff of the first two variants and the A/A noise floor.
    """
    notes = notes if notes is not None else []
    rows, programs = plan_rows(benches, _exp_dir(exp))
    if not rows:
        return []
    settings = settings or boots.BootSettings(timeout=BOOT_SECONDS + sum(r.budget for r in rows))
    by_target: dict[str, list] = {}
    for build in kernel_builds:
        by_target.setdefault(str(_get(_get(build, "cell"), "target", "x86_64")), []).append(build)
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
        booted, floor = _boot_all(t, builds, rows, initrd, tdir, settings, noise_floor, progress)
        _write_notes(notes, rows, booted, builds, floor, settings, t, profile_top)
        common = {"qemu": boots.qemu_version(t.qemu), "target": t.name,
                  "guest_time": "emulated" if settings.accel == "tcg" else "real", **settings.provenance()}
        cells += _cells(t, builds, rows, booted, floor, common, settings, profile_top)
    return cells


def _boot_all(t, builds, rows, initrd, tdir, settings, noise_floor, progress):
    """One boot per variant (and one more of the baseline for the A/A floor)."""
    booted: dict[str, VariantBoot] = {}
    floor: dict[str, float] = {}
    with _progress(progress) as bar:
        task = bar.add_task("booting guests", total=len(builds) + (1 if noise_floor else 0))
        for build in builds:
            variant = _variant_name(build)
            bar.update(task, description=f"booting {variant} ({t.name}, {settings.accel})")
            if not _get(build, "ok", True):
                booted[variant] = VariantBoot(variant, None, {}, f"kernel build failed: {_get(build, 'error', '')}")
            else:
                booted[variant] = boot_variant(variant, t, build, initrd, rows, tdir / f"boot-{variant}", settings)
            bar.advance(task)
        if noise_floor and _get(builds[0], "ok", True):
            bar.update(task, description="A/A noise floor boot")
            perturbed = replace(settings, append=(*settings.append, AA_WORD))
            aa = boot_variant("aa", t, builds[0], initrd, rows, tdir / "boot-aa", perturbed)
            base = booted[_variant_name(builds[0])]
            for row in rows:
                x, y = base.rows.get(row.tag), aa.rows.get(row.tag)
                if x and y and not x.failure and not y.failure and x.iterations and y.iterations:
                    floor[row.tag] = abs(y.per_iter(y.kernel) - x.per_iter(x.kernel))
            bar.advance(task)
    return booted, floor


def _cells(t, builds, rows, booted, floor, common, settings, profile_top) -> list[BenchCell]:
    cells = []
    executor = f"qemu-system-{settings.accel}"
    for row in rows:
        profiles = [vb.rows[row.tag] for vb in booted.values() if row.tag in vb.rows]
        symbols = top_symbols([p.profile for p in profiles if not p.failure], profile_top)
        for build in builds:
            variant = _variant_name(build)
            vb = booted[variant]
            prov = {**common, **_kernel_provenance(build), "aa_noise_floor_kernel_per_iter": floor.get(row.tag)}
            r = vb.rows.get(row.tag)
            if r and not r.failure:
                prov.update(guest_iterations=r.iterations, guest_ns=r.ns,
                            guest_ops_per_s=r.iterations * 1e9 / r.ns if r.ns > 0 else None)
            compiler = str(_get(_get(build, "cell"), "compiler", "gcc"))
            cells.append(BenchCell(row.bench, variant, t.name, compiler, dict(row.params),
                                   counted=_counts_job(vb, row.tag), counted_metric="kernel_insns_per_iter",
                                   count_executor=executor, provenance=prov))
            if symbols:
                cells.append(BenchCell(f"{row.bench} kernel profile", variant, t.name, compiler,
                                       dict(row.params), counted=_profile_job(vb, row.tag, symbols),
                                       counted_metric=f"insns_per_iter:{symbols[0]}",
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


def _counts_job(vb: VariantBoot, tag: str):
    def job(emit: Emit) -> str | None:
        r, reason = _measured(vb, tag)
        if r is None:
            return reason
        emit("kernel_insns_per_iter", r.per_iter(r.kernel), "insns")
        emit("user_insns_per_iter", r.per_iter(r.user), "insns")
        return None
    return job


def _profile_job(vb: VariantBoot, tag: str, symbols: list[str]):
    """One exact metric per symbol, "insns_per_iter:SYMBOL": the report makes each its own
    row of the profile bench's exact-counts table (params.count)."""
    def job(emit: Emit) -> str | None:
        r, reason = _measured(vb, tag)
        if r is None:
            return reason
        for sym in symbols:
            emit(f"insns_per_iter:{sym}", r.per_iter(r.profile.get(sym, 0)), "insns")
        return None
    return job


def _kernel_provenance(build: Any) -> dict:
    config = _get(build, "config")
    out = {}
    if config and Path(config).exists():
        text = Path(config).read_text(errors="replace")
        out["kernel_config_sha256"] = hashlib.sha256(text.encode()).hexdigest()[:16]
        m = re.search(r"Linux/\S+ (\S+) Kernel Configuration", text)
        if m:
            out["kernel_version"] = m.group(1)
    return out


def _exp_dir(exp: Any) -> Path:
    for key in ("dir", "path", "root"):
        value = _get(exp, key)
        if value:
            p = Path(value)
            return p if p.is_dir() else p.parent
    source = _get(exp, "source")
    if source:
        return Path(source).parent
    raise UserError("the kernel experiment does not say where its files are (no dir/path/source)")


def _write_notes(notes: list[str], rows, boots_by_variant, builds, floor, settings, t, top) -> None:
    notes.append(f"guest: {t.name} under qemu-system {settings.accel}, icount shift={settings.icount_shift},"
                 f"sleep=off, rtc base {settings.rtc_base}; guest ops/s are emulated time: no timing verdict")
    variants = [_variant_name(b) for b in builds]
    for row in rows:
        if len(variants) >= 2:
            a, b = (boots_by_variant[v].rows.get(row.tag) for v in variants[:2])
            if a and b and not a.failure and not b.failure:
                notes.append(f"kernel profile, {row.tag}, instructions per iteration:")
                notes += ["  " + line for line in profile_table(a, b, (variants[0], variants[1]), top)]
        if row.tag in floor:
            notes.append(f"A/A noise floor, {row.tag}: {floor[row.tag]:.2f} kernel instructions per iteration "
                         f"(baseline booted twice, one extra ignored command-line word)")


class _NoBar:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *a, **k):
        return 0

    def update(self, *a, **k):
        pass

    def advance(self, *a, **k):
        pass


def _progress(show: bool):
    if not show:
        return _NoBar()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.console import Console
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=True)


def dump_json(vb: VariantBoot) -> str:
    """A boot's parsed rows, for debugging and the case's report."""
    return json.dumps({"variant": vb.variant, "failure": vb.failure,
                       "rows": {k: r.__dict__ for k, r in vb.rows.items()}}, indent=1)
