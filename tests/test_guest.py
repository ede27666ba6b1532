"""Booting a real kernel (tinyconfig x86_64 + boot-x86_64.config, built once and shared
with test_kernel through tests/kernel_util.py) with an initramfs flagbench writes, and
measuring inside it under qemu-system TCG with the syscount plugin.

Boots are few (each a few seconds under TCG with -icount shift=4): two of one kernel for
repeatability, one through guest_cells with a crashing bench, one panic, one hang.
"""
from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import bench
from flagbench.run.guest import boot as boots
from flagbench.run.guest import guest
from flagbench.run.guest.initramfs import file as initramfs_file
from flagbench.run.guest.initramfs import newc

pytestmark = [pytest.mark.slow,   # a kernel build and qemu boots
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu-system-x86")]

X86 = boots.target("x86_64")
PAGE_FAULT = Path(__file__).resolve().parent.parent / "cases" / "memcpy-strategy" / "page_fault.c"
CRASH_C = "int main(void) { *(volatile int *)0 = 1; return 0; }\n"
QUICK = boots.BootSettings(timeout=240)


@pytest.fixture(scope="module")
def kernel():
    from kernel_util import build_test_kernels   # cached, file-locked: one build for both test files
    build = build_test_kernels(("default",))["default"]
    assert build.ok, build.error
    return build


def _qemus_using(path: Path) -> list[int]:
    """Live processes whose command line mentions `path` (each boot's own work directory)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(int(pid))
    return found


def _page_fault(**wis):
    return bench({"name": "page_fault", "kind": "wis", "guest": True, "testcase": str(PAGE_FAULT),
                  "tasks": [1], "modes": ["processes"], "duration": 0.3, "warmup_seconds": 0.05, **wis})


def _rows(exp_dir: Path, **wis) -> tuple[list, dict]:
    return guest.plan_rows([_page_fault(**wis)], exp_dir)


def test_newc_archive_layout():
    """The newc header is the kernel's (usr/gen_init_cpio.c): magic, 13 hex fields, name, 4-byte padding."""
    data = newc([initramfs_file("init", b"abc")])
    assert data[:6] == b"070701"
    fields = [int(data[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
    assert fields[1] == 0o100755 and fields[6] == 3 and fields[11] == len("init") + 1
    name_end = 110 + 5
    assert data[110:name_end] == b"init\0"
    body = name_end + (-name_end % 4)
    assert data[body:body + 3] == b"abc"
    assert b"TRAILER!!!\0" in data and len(data) % 4 == 0


def test_counts_repeat_bit_for_bit_and_profile_sums_to_kernel(kernel, tmp_path):
    rows, programs = _rows(tmp_path)
    initrd = guest.make_initramfs(X86, rows, programs, tmp_path)
    results = []
    for run in ("one", "two"):
        r = boots.boot(X86, Path(kernel.vmlinux), initrd, workdir=tmp_path / run, settings=QUICK,
                       system_map=Path(kernel.system_map))
        assert r.ok, f"{r.reason}\n{r.tail()}"
        assert not _qemus_using(tmp_path / run)
        parsed = guest.parse_console(r.console, r.regions, rows)["page_fault.processes.1"]
        assert not parsed.failure, parsed.failure
        results.append((parsed, r.regions[0]))
    (a, region_a), (b, region_b) = results
    assert a.iterations > 100                       # 511 pages per mmap: hundreds of faults in 0.3 s
    assert (a.iterations, a.kernel, a.user) == (b.iterations, b.kernel, b.user)
    assert region_a.profile == region_b.profile
    assert sum(region_a.profile.values()) == region_a.kernel
    # A page fault runs the fault handlers; the kernel executes thousands of instructions per fault.
    assert region_a.profile.get("handle_mm_fault", 0) >= a.iterations
    assert a.per_iter(a.kernel) > 500
    assert 0 < a.per_iter(a.user) < 100               # the testcase's loop body per page touched


def test_guest_cells_emit_exact_rows_and_a_crashing_bench_fails_alone(kernel, tmp_path):
    (tmp_path / "crash.c").write_text(CRASH_C)
    benches = [_page_fault(), bench({"name": "crash", "kind": "command", "guest": True, "command": ["crash.c"]},
                                       root=tmp_path)]
    notes: list[str] = []
    cells = guest.guest_cells(SimpleNamespace(root=tmp_path), benches, [kernel], workdir=tmp_path / "work",
                              notes=notes, settings=QUICK, noise_floor=False)
    by_bench = {c.bench: c for c in cells}
    emitted: list[tuple[str, float, str]] = []
    assert by_bench["page_fault"].counted(lambda m, v: emitted.append((m.name, v, m.unit))) is None
    metrics = {m: v for m, v, _ in emitted}
    assert metrics["kernel_insns_per_iter"] > 500 and metrics["user_insns_per_iter"] > 0
    prov = by_bench["page_fault"].provenance
    assert prov["accel"] == "tcg" and prov["icount"] == "shift=4,sleep=off" and prov["guest_time"] == "emulated"
    assert prov["guest_ops_per_s"] > 0 and prov["qemu"].startswith("QEMU emulator version")
    profile: list[tuple[str, float, str]] = []
    assert by_bench["page_fault kernel profile"].counted(lambda m, v: profile.append((m.name, v, m.unit))) is None
    names = [m.split(":", 1)[1] for m, _, _ in profile]
    assert len(names) == guest.PROFILE_TOP and "exc_page_fault" in names   # the fault entry is among the top
    assert all(v > 0 for _, v, _ in profile)
    reason = by_bench["crash"].counted(lambda *m: None)
    assert reason and reason.startswith("in the guest: SIGSEGV") and "FB bench crash" in reason   # + console
    assert any("icount shift=4" in n for n in notes)


OK_C = "int main(void) { volatile unsigned long x = 0; for (int i = 0; i < 100000; i++) x += i; return 0; }\n"
HANG_C = "int main(void) { for (volatile int i = 0; ; i++) ; }\n"


def _ok_crash_hang(tmp_path: Path, hang_timeout: float) -> list:
    for name, text in (("ok", OK_C), ("crash", CRASH_C), ("hang", HANG_C)):
        (tmp_path / f"{name}.c").write_text(text)
    return [bench({"name": name, "kind": "command", "guest": True, "command": [f"{name}.c"],
                   **({"timeout": hang_timeout} if name == "hang" else {})}, root=tmp_path)
            for name in ("ok", "crash", "hang")]


def _run_jobs(cells) -> dict[str, tuple]:
    """Every cell's counted job, as the engine runs it: bench -> (failure reason, metrics)."""
    out = {}
    for cell in cells:
        emitted: list = []
        reason = cell.counted(lambda metric, value, unit=None: emitted.append((getattr(metric, "name", metric), value)))
        out[cell.bench] = (reason, dict(emitted))
    return out


def _booted(work: Path) -> list[str]:
    return sorted(p.parent.name for p in work.rglob("console.log"))


@pytest.mark.slow
def test_each_guest_bench_fails_alone_in_one_boot(kernel, tmp_path):
    """ok finishes, crash dies of SIGSEGV, hang spins past its timeout = 10: init kills it and goes
    on (it ran to the boot's bound, and all three cells failed "timeout"). One boot of the kernel,
    and one more of the baseline for the A/A floor, serve every row."""
    work = tmp_path / "work"
    cells = guest.guest_cells(SimpleNamespace(root=tmp_path), _ok_crash_hang(tmp_path, 10), [kernel],
                              workdir=work, settings=QUICK)
    assert _booted(work) == []                          # nothing boots while the cells are planned
    results = _run_jobs(cells)
    assert results["ok"][0] is None and results["ok"][1]["kernel_insns_per_iter"] > 0
    assert results["crash"][0].startswith("in the guest: SIGSEGV")
    assert results["hang"][0].startswith("timeout after 10 s of guest time (killed in the guest)")
    assert results["ok kernel profile"][0] is None and results["ok kernel profile"][1]
    assert _booted(work) == ["boot-aa", "boot-default"]
    assert "FB done" in (work / "x86_64" / "boot-default" / "console.log").read_text()
    assert not _qemus_using(work)


@pytest.mark.slow
def test_rows_on_the_console_are_kept_when_the_boot_times_out(kernel, tmp_path):
    """The boot's own bound ends qemu while hang still spins: ok's and crash's results were
    already on the console (and ok's counts in the plugin's file) and are kept."""
    work = tmp_path / "work"
    # 45 s: a boot that runs ok and crash takes ~10 s here (test_each_guest_bench_fails_alone_...)
    cells = guest.guest_cells(SimpleNamespace(root=tmp_path), _ok_crash_hang(tmp_path, 3600), [kernel],
                              workdir=work, settings=boots.BootSettings(timeout=45), noise_floor=False)
    results = _run_jobs([c for c in cells if not c.bench.endswith("profile")])
    assert results["ok"][0] is None and results["ok"][1]["kernel_insns_per_iter"] > 0
    assert results["crash"][0].startswith("in the guest: SIGSEGV")
    assert results["hang"][0].startswith("timeout after 45 s (it did not finish)")
    assert _booted(work) == ["boot-default"] and not _qemus_using(work)


@pytest.mark.slow
def test_a_resumed_run_boots_no_kernel_for_rows_already_stored(kernel, tmp_path):
    """Guest benches were measured while the cells were planned: a resumed run booted every
    kernel again, and Ctrl-C during the boots stored nothing. Now a boot is a cell's job."""
    from flagbench.run.engine import EXIT_INTERRUPTED, run_cells
    from flagbench.store import Store
    from rich.console import Console
    benches = _ok_crash_hang(tmp_path, 10)[:2]

    def session(name: str, interrupt_at: int | None = None):
        work = tmp_path / name
        cells = guest.guest_cells(SimpleNamespace(root=tmp_path), benches, [kernel], workdir=work,
                                  settings=QUICK, noise_floor=False)
        started = []
        for cell in cells:
            def job(emit, inner=cell.counted):
                started.append(1)
                if len(started) == interrupt_at:
                    raise KeyboardInterrupt   # Ctrl-C, as the second job begins
                return inner(emit)
            cell.counted = job
        with Store(tmp_path / "fb.db") as store:
            out = run_cells(store, cells, experiment="guests", experiment_hash="h", progress=False,
                            console=Console(file=io.StringIO()))
            finished = [c for c in store.cells(out.run_id) if c["status"] in ("ok", "failed")]
        return out, len(finished), _booted(work)

    out, finished, booted = session("one", interrupt_at=2)
    assert out.status == EXIT_INTERRUPTED and finished == 1 and booted == ["boot-default"]
    out, finished, booted = session("two")          # the rows still missing: one boot
    assert out.skipped == 1 and finished == 4 and booted == ["boot-default"]
    out, finished, booted = session("three")        # every row stored: no boot at all
    assert out.skipped == 4 and booted == []


def test_panicking_kernel_fails_with_console_tail(kernel, tmp_path):
    rows, programs = _rows(tmp_path)
    initrd = guest.make_initramfs(X86, rows, programs, tmp_path)
    settings = boots.BootSettings(timeout=240, append=("flagbench.exit",))   # /init exits: the kernel panics
    r = boots.boot(X86, Path(kernel.vmlinux), initrd, workdir=tmp_path / "panic", settings=settings)
    assert not r.ok
    assert r.reason.startswith("Kernel panic - not syncing: Attempted to kill init")
    assert "FB exiting on request" in r.tail()
    assert not _qemus_using(tmp_path / "panic")


def test_hanging_boot_times_out_and_leaves_no_qemu(kernel, tmp_path):
    rows, programs = _rows(tmp_path)
    initrd = guest.make_initramfs(X86, rows, programs, tmp_path)
    settings = boots.BootSettings(timeout=15, append=("flagbench.hang",))   # /init waits forever
    r = boots.boot(X86, Path(kernel.vmlinux), initrd, workdir=tmp_path / "hang", settings=settings)
    assert not r.ok and r.reason == "timeout after 15 s"
    assert "Linux version" in r.console             # what the console had is kept for the report
    assert not _qemus_using(tmp_path / "hang")


def test_sigterm_to_flagbench_takes_its_qemu_along(kernel, tmp_path):
    """A flagbench killed while a guest runs leaves no qemu (procs: PDEATHSIG + signal handlers)."""
    import signal
    import subprocess
    import sys
    import time
    rows, programs = _rows(tmp_path)
    initrd = guest.make_initramfs(X86, rows, programs, tmp_path)
    work = tmp_path / "term"
    script = ("import sys; from pathlib import Path; from flagbench import procs; procs.install(); "
              "from flagbench.run.guest import boot as b; "
              "b.boot(b.target('x86_64'), Path(sys.argv[1]), Path(sys.argv[2]), workdir=Path(sys.argv[3]), "
              "settings=b.BootSettings(timeout=300, append=('flagbench.hang',)))")
    child = subprocess.Popen([sys.executable, "-c", script, str(kernel.vmlinux), str(initrd), str(work)])
    try:
        console = work / "console.log"
        for _ in range(600):   # until the guest is up and waiting
            if console.exists() and "FB hanging" in console.read_text(errors="replace"):
                break
            time.sleep(0.1)
        assert _qemus_using(work), "the guest never came up"
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.wait()
    time.sleep(0.5)
    assert not _qemus_using(work)


def test_boot_fragment_is_added_only_when_the_experiment_lacks_it(tmp_path):
    from conftest import write_experiment
    from flagbench import spec
    kernel_toml = """
        targets = ["x86_64"]
        [kernel]
        source = "debian:6.1"
        config = "tinyconfig"
        {fragments}
        [variants]
        default = {{}}
        """
    bare = write_experiment(tmp_path / "bare", kernel_toml.format(fragments=""), {})
    assert boots.boot_fragments(spec.load(bare)) == [boots.boot_fragment("x86_64")]
    case = Path(__file__).resolve().parent.parent / "cases" / "kernel-memcpy-strategy"
    assert boots.boot_fragments(spec.load(case)) == []   # it lists the fragment itself


# -- the in-guest will-it-scale driver, run natively (x86_64 static, the same build as the guest's) --
IDLE_TESTCASE = """
#include <unistd.h>
char *testcase_description = "idle";
void testcase(unsigned long long *iterations, unsigned long nr) { (*iterations)++; for (;;) pause(); }
"""
GREEDY_TESTCASE = IDLE_TESTCASE + """
void new_task(void *(*fn)(void *), void *arg);
static void *idle(void *arg) { pause(); return arg; }
void testcase_prepare(unsigned long nr) { for (int i = 0; i < 1100; i++) new_task(idle, 0); }
"""


def _wis_driver(tmp_path: Path, source: str, name: str) -> Path:
    testcase = tmp_path / f"{name}.c"
    testcase.write_text(source)
    return guest.build_program(X86, name, [testcase], tmp_path / "bin", guest.WIS_GUEST_C)


def test_the_guest_driver_runs_as_many_tasks_as_the_spec_allows(tmp_path):
    """The spec allows 1024 tasks; the driver stopped at 256 ("bad arguments" in the guest)."""
    from flagbench.benchspec import MAX_TASKS
    exe = _wis_driver(tmp_path, IDLE_TESTCASE, "idle")
    done = subprocess.run([str(exe), str(MAX_TASKS), "0", "50"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert re.match(r"FB region iterations=\d+ ns=\d+", done.stdout)


def test_the_guest_driver_refuses_more_tasks_than_it_has_room_for(tmp_path):
    """A testcase that starts tasks itself (new_task) wrote past the driver's pid array."""
    from flagbench.benchspec import MAX_TASKS
    exe = _wis_driver(tmp_path, GREEDY_TESTCASE, "greedy")
    assert MAX_TASKS < 1100
    done = subprocess.run([str(exe), "1", "0", "10"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and f"wis_guest: more than {MAX_TASKS} tasks" in done.stderr, done


@pytest.mark.parametrize("args", [["2x", "0", "10"], ["1", "0", "10ms"], ["1", "-5", "10"], ["", "0", "10"],
                                  ["99999999999999999999", "0", "10"]])
def test_the_guest_driver_refuses_arguments_that_are_not_numbers(tmp_path, args):
    exe = _wis_driver(tmp_path, IDLE_TESTCASE, "idle")
    done = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "bad arguments" in done.stderr, done
