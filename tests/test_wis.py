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
from flagbench.run.wis import run_wis

DATA = Path(__file__).parent / "data"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="apt-get install gcc")


def test_page_fault_with_prepare_both_modes():
    seen = []
    results = run_wis(DATA / "wis_page_fault.c", tasks=[1, 2], modes=("processes", "threads"),
                      duration=0.6, warmup=0.4, interval=0.2,
                      on_sample=lambda *sample: seen.append(sample))
    assert [(r["mode"], r["tasks"]) for r in results] == [
        ("processes", 1), ("processes", 2), ("threads", 1), ("threads", 2)]
    for r in results:
        # The testcase exits 3 if testcase_prepare was not called first.
        assert r["failure"] is None
        assert r["description"] == "Anonymous memory page faults (flagbench test)"
        assert len(r["warmup_samples"]) == 2 and len(r["samples"]) == 3
        assert r["per_second"] > 0 and all(s > 0 for s in r["samples"])
        assert r["per_second"] == pytest.approx(sum(r["samples"]) / 3)
    # Every sample reached the callback as taken, warm-up ones flagged.
    assert len(seen) == 4 * 5
    assert sum(1 for *_, warm in seen if warm) == 4 * 2
    assert [index for mode, tasks, index, _, _ in seen if (mode, tasks) == ("threads", 2)] == [0, 1, 2, 3, 4]


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
                      duration=0.2, warmup=0, interval=0.2)
    failures = {(r["mode"], r["tasks"]): r["failure"] for r in results}
    assert failures[("processes", 1)] is None and failures[("threads", 1)] is None
    assert "task 1 killed by SIGSEGV" in failures[("processes", 2)]
    assert failures[("threads", 2)] == "SIGSEGV"
    assert main(["wis", str(crash), "--tasks", "2", "--mode", "threads", "--duration", "0.2",
                 "--warmup", "0", "--interval", "0.2"]) == 1
    assert "FAILED: SIGSEGV" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--tasks", "0"], "task counts start at 1"),
    (["--tasks", "x"], "expected numbers"),
    (["--duration", "0"], "positive"),
])
def test_bad_input(argv, message, capsys):
    assert main(["wis", str(DATA / "wis_getppid.c"), *argv]) == 2
    assert message in capsys.readouterr().err


def test_missing_testcase(capsys):
    assert main(["wis", "/nonexistent/t.c"]) == 2
    assert "no such testcase" in capsys.readouterr().err


def test_kernel_like_non_pic_flags_still_link(tmp_path):
    """-fno-pic objects cannot go into Debian's default PIE executable: the driver links -no-pie."""
    from flagbench.run.wis import build_testcase
    exe = build_testcase(DATA / "wis_getppid.c", "processes", tmp_path,
                         ["-O2", "-mno-sse", "-mgeneral-regs-only", "-fno-pic"])
    assert exe.exists()
    header = subprocess.run(["readelf", "-h", str(exe)], capture_output=True, text=True, check=True).stdout
    assert "EXEC (Executable file)" in header
