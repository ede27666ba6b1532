"""will-it-scale testcases built with our driver and run for real (short samples).

Rates are never asserted beyond "> 0"; sample counts and warm-up dropping are.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from flagbench.cli import main
from flagbench.run import wis

DATA = Path(__file__).parent / "data"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="apt-get install gcc")


@pytest.fixture(autouse=True)
def cache(module_cache):
    """Testcases and the driver go through the object cache: one per module here."""


def run_wis(testcase, **kw):
    return wis.run_wis(testcase, workdir=kw.pop("workdir"), **kw)


def test_page_fault_with_prepare_both_modes(tmp_path):
    results = run_wis(DATA / "wis_page_fault.c", tasks=[1, 2], modes=("processes", "threads"),
                      duration=0.6, warmup=0.4, interval=0.2, workdir=tmp_path)
    assert [(r["mode"], r["tasks"]) for r in results] == [
        ("processes", 1), ("processes", 2), ("threads", 1), ("threads", 2)]
    for r in results:
        # The testcase exits 3 if testcase_prepare was not called first.
        assert r["failure"] is None
        assert r["description"] == "Anonymous memory page faults (flagbench test)"
        assert len(r["warmup_samples"]) == 2 and len(r["samples"]) == 3
        assert r["per_second"] > 0 and all(s > 0 for s in r["samples"])
        assert r["per_second"] == pytest.approx(sum(r["samples"]) / 3)


def test_cli_json(capsys):
    rc = main(["wis", str(DATA / "wis_getppid.c"), "--tasks", "1,2", "--mode", "processes",
               "--duration", "0.4", "--warmup", "0.2", "--interval", "0.2", "--format", "json",
               "--cflags", "-O1 -DUNUSED=1"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert [(r["mode"], r["tasks"]) for r in out["results"]] == [("processes", 1), ("processes", 2)]
    assert all(r["per_second"] > 0 and len(r["samples"]) == 2 for r in out["results"])
    assert out["cflags"] == ["-O1", "-DUNUSED=1"]


def test_cli_text(capsys):
    rc = main(["wis", str(DATA / "wis_getppid.c"), "--mode", "threads",
               "--duration", "0.2", "--warmup", "0", "--interval", "0.2"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0] == "getppid system call (flagbench test)"
    assert out.splitlines()[2].split()[:2] == ["threads", "1"]


def test_testcase_that_does_not_compile(tmp_path, capsys):
    bad = tmp_path / "broken.c"
    bad.write_text("char *testcase_description = \"x\";\n"
                   "void testcase(unsigned long long *it, unsigned long nr) { undeclared_thing++; }\n")
    assert main(["wis", str(bad), "--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "does not compile" in err and "undeclared_thing" in err
    assert len(err.strip().splitlines()) == 1


def test_crashing_task_is_a_failed_cell(tmp_path, capsys):
    crash = tmp_path / "crash.c"
    crash.write_text("char *testcase_description = \"crash\";\n"
                     "void testcase(unsigned long long *it, unsigned long nr)\n"
                     "{ if (nr == 1) *(volatile int *)0 = 0; for (;;) (*it)++; }\n")
    results = run_wis(crash, tasks=[1, 2], modes=("processes", "threads"),
                      duration=0.2, warmup=0, interval=0.2, workdir=tmp_path)
    failures = {(r["mode"], r["tasks"]): r["failure"] for r in results}
    assert failures[("processes", 1)] is None and failures[("threads", 1)] is None
    assert "task 1 killed by SIGSEGV" in failures[("processes", 2)]
    assert failures[("threads", 2)] == "SIGSEGV"
    assert main(["wis", str(crash), "--tasks", "2", "--mode", "threads", "--duration", "0.2",
                 "--warmup", "0", "--interval", "0.2"]) == 1
    assert "FAILED: SIGSEGV" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--tasks", "0"], "task counts are 1..1024"),
    (["--tasks", "x"], "expected numbers"),
    (["--duration", "0"], "positive"),
    # issue 11: tracebacks before (ValueError / MemoryError), one line now
    (["--duration", "nan"], "--duration nan: not a number of seconds"),
    (["--duration", "inf"], "--duration inf: not a number of seconds"),
    (["--warmup", "nan"], "--warmup nan: not a number of seconds"),
    (["--tasks", "1-100000000"], "task counts are 1..1024"),
    (["--tasks", "1,1"], "appears twice"),
])
def test_bad_input(argv, message, capsys):
    assert main(["wis", str(DATA / "wis_getppid.c"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_missing_testcase(capsys):
    assert main(["wis", "/nonexistent/t.c"]) == 2
    assert "no such testcase" in capsys.readouterr().err


def test_kernel_like_non_pic_flags_still_link(tmp_path):
    """-fno-pic objects cannot go into a PIE executable: the driver is linked static, not PIE."""
    exe = wis.build_programs(DATA / "wis_getppid.c", ["processes"],
                             ["-O2", "-mno-sse", "-mgeneral-regs-only", "-fno-pic"], out_dir=tmp_path)["processes"]
    header = subprocess.run(["readelf", "-h", str(exe)], capture_output=True, text=True, check=True).stdout
    assert "EXEC (Executable file)" in header


def test_a_c_file_without_a_testcase_says_so(tmp_path, capsys):
    """Issue 11: wis on a C file with no `testcase` printed linker noise, not the cause."""
    plain = tmp_path / "plain.c"
    plain.write_text("int helper(int x) { return x + 1; }\n")
    assert main(["wis", str(plain), "--duration", "1"]) == 2
    err = capsys.readouterr().err
    assert "not a will-it-scale testcase: it defines no testcase and no testcase_description" in err
    assert len(err.strip().splitlines()) == 1 and "undefined reference" not in err


def test_a_testcase_is_compiled_once_however_many_runs(tmp_path, module_cache):
    """Issue 12: the testcase went through its own compiler call, once per sample; now it is an
    object of the build cache: building the programs again adds no object, and runs only run."""
    first = wis.build_programs(DATA / "wis_getppid.c", ["threads"], ["-O2", "-DONCE=1"], out_dir=tmp_path / "a")
    objects = sorted((module_cache / "objects").rglob("*.o"))
    second = wis.build_programs(DATA / "wis_getppid.c", ["threads"], ["-O2", "-DONCE=1"], out_dir=tmp_path / "b")
    assert sorted((module_cache / "objects").rglob("*.o")) == objects
    assert first["threads"].read_bytes() == second["threads"].read_bytes()
    for _ in range(2):
        assert wis.run_driver(second["threads"], 1, 0, 1, 0.2)["failure"] is None
    assert sorted((module_cache / "objects").rglob("*.o")) == objects


@pytest.mark.parametrize("line", ["sample 0 -5 100", "sample 0 0 100", "sample 0 1e308 100",
                                  "sample 0 1000 " + "1" + "0" * 40, "sample 0 1000 ١٢"])
def test_a_driver_line_it_cannot_print_is_garbage(line):
    """Counts from a host are the driver's unsigned 64-bit integers, and its interval takes time."""
    from flagbench.run.wis import _take_line
    result = {"samples": [], "warmup_samples": []}
    with pytest.raises(ValueError):
        _take_line(line, result, 0)
    _take_line("sample 0 1000000000 5", result, 0)
    assert result["samples"] == [5.0]
