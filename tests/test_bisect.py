"""Bisection (flagbench.bisect): the searches on their own, then with real parts: gcc, callgrind,
git repositories the tests make, and the test kernels (Kbuild relinks, qemu boots).

- object bisection on a C experiment: B changes one function a lot and another a little, and
  -g makes every object differ; the search must name the object with the big change;
- commit bisection on exact counts: a repository of 8 commits, one makes a loop longer;
  found in ceil(log2 8) + 1 builds;
- commit bisection on time: a commit makes a loop ~10 % slower; found by paired rounds, with the
  exact counts as the cross-check of which commit that is;
- object bisection on a kernel pair (slow): the one-function patch; the object named must be
  the one holding the functions whose counts moved.
"""
from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment
from flagbench import spec
from flagbench.store import Store
from flagbench.bisect import search, timed

HAVE_CALLGRIND = shutil.which("valgrind") is not None
callgrind = pytest.mark.skipif(not HAVE_CALLGRIND, reason="needs valgrind (callgrind)")


# -- the searches -----------------------------------------------------------------------------
@pytest.mark.parametrize("n, first", [(1, 0), (2, 0), (2, 1), (8, 0), (8, 3), (8, 7), (13, 6), (100, 99)])
def test_first_bad_finds_it_in_log2_steps(n, first):
    seen = []

    def decide(i):
        seen.append(i)
        return (search.BAD if i >= first else search.GOOD), ""
    found = search.first_bad(n, decide)
    assert found.first == first
    assert len(seen) == len(set(seen))
    bound = math.ceil(math.log2(n)) if n > 1 else 0
    # the bad end is assumed; measured only when the search ends on it
    assert len(seen) <= bound + (1 if first == n - 1 else 0)


def test_skipped_commits_are_stepped_around_and_can_leave_candidates():
    def decide_with(broken):
        def decide(i):
            if i in broken:
                return search.SKIP, "does not build"
            return (search.BAD if i >= 5 else search.GOOD), ""
        return decide
    found = search.first_bad(10, decide_with({6}))
    assert found.first == 5 and [s.index for s in found.steps] == [4, 6, 5]
    found = search.first_bad(10, decide_with({4}))    # its parent does not build: either may be first
    assert found.first is None and found.candidates == [4, 5]
    found = search.first_bad(4, lambda i: (search.GOOD, ""))
    assert found.first is None and "bad end measured good" in found.note


def test_narrow_finds_the_carrier_and_a_spread_effect():
    weights = {"a.o": 1.0, "b.o": 0.0, "c.o": 30.0, "d.o": 0.5, "e.o": 0.0}
    got = search.narrow(list(weights), lambda s: sum(weights[o] for o in s))
    assert got.objects == ["c.o"] and 0.9 < got.share < 1.0
    spread = {"a.o": 10.0, "b.o": 0.0, "c.o": 0.0, "d.o": 0.0, "e.o": 0.0, "f.o": 0.0, "g.o": 0.0, "h.o": 10.0}
    got = search.narrow(list(spread), lambda s: sum(spread[o] for o in s))
    assert got.objects == ["a.o", "h.o"] and got.share == 1.0


def test_threshold_parsing_and_direction():
    assert timed.parse_threshold("+5%") == timed.Threshold(0.05, 1)
    assert timed.parse_threshold("-2.5%") == timed.Threshold(0.025, -1)
    assert timed.parse_threshold("10") == timed.Threshold(0.1, 0)      # a bare number is percent
    t = timed.parse_threshold("5%")
    assert t.past(1.06) and t.past(0.94) and not t.past(1.04)
    with pytest.raises(ValueError):
        timed.parse_threshold("fast")
    assert timed.looks(48) == [8, 12, 16, 24, 32, 48]
    assert timed.looks(20) == [8, 12, 16, 20]


# -- object bisection, C ------------------------------------------------------------------------
WORK_C = """#include <stdint.h>
uint64_t f1(uint64_t), f2(uint64_t), f3(uint64_t), f4(uint64_t);
uint64_t work(uint64_t n);
uint64_t work(uint64_t n) {
    uint64_t s = 0;
    for (uint64_t i = 0; i < n; i++)
        s += f1(i) + f2(i) + f3(i) + f4(i);
    return s;
}
"""
F_C = """#include <stdint.h>
#ifndef EXTRA
#define EXTRA 0
#endif
uint64_t f{k}(uint64_t x);
uint64_t f{k}(uint64_t x) {{
    uint64_t acc = x;
    for (int j = 0; j < {loop}; j++) {{
        acc = acc * 31 + (uint64_t)j;
        __asm__ volatile("" : "+r"(acc));
    }}
    return acc;
}}
"""
LOOPS = {1: "2 + EXTRA", 2: "2", 3: "3 + 20 * EXTRA", 4: "2"}   # f3 grows by 20 turns, f1 by 1


def _c_experiment(root: Path) -> Path:
    sources = {"work.c": WORK_C, **{f"f{k}.c": F_C.format(k=k, loop=loop) for k, loop in LOOPS.items()}}
    return write_experiment(root, """
        name = "objects"
        sources = ["work.c", "f1.c", "f2.c", "f3.c", "f4.c"]
        targets = ["x86_64"]
        compilers = ["gcc"]
        cflags = ["-O2"]
        [variants]
        a = {}
        b = { cflags = ["-g"], defines = { EXTRA = "1" } }
        [[bench]]
        name = "work"
        kind = "micro"
        function = "work"
        metrics = ["insns"]
        """, sources)


@callgrind
def test_object_bisection_names_the_object_of_the_changed_function(tmp_path, module_cache):
    from flagbench.bisect.objects import bisect_objects, summary
    exp = spec.load(_c_experiment(tmp_path / "exp"))
    lines: list[str] = []
    out = bisect_objects(exp, None, metric="insns", bench=None, share=0.8, workdir=tmp_path / "work",
                         say=lines.append)
    assert out.candidates == ["f1.o", "f2.o", "f3.o", "f4.o", "work.o"]   # -g: every object differs
    assert out.narrowed.objects == ["f3.o"]
    # f3 runs 20 more turns a call, f1 one more: f3's share lies well above 80 %, below 100 %
    assert 0.8 < out.narrowed.share < 1.0
    # exact counts: B's objects all put into A measure what B measures
    assert out.narrowed.full == pytest.approx(out.value_b - out.value_a)
    assert out.value_b > out.value_a
    text = "\n".join(summary(out))
    assert "f3.o carries" in text


@callgrind
def test_object_bisection_cli_and_bad_input(tmp_path, module_cache):
    exp = _c_experiment(tmp_path / "exp")
    done = flagbench("bisect", str(exp), "--objects", "--metric", "size", cache=module_cache)
    assert done.returncode == 0, done.stderr
    # code bytes add up exactly: all of B's differing objects in A measure what B measures
    first, second = done.stdout.splitlines()[:2]
    b_minus_a = first.split("(")[1].split(")")[0]
    assert second.endswith(f"in a: {b_minus_a}") and " carr" in done.stdout
    done = flagbench("bisect", str(exp), "--objects", "a", "nope", cache=module_cache)
    assert done.returncode == 2 and "no variant 'nope'" in done.stderr and "Traceback" not in done.stderr
    done = flagbench("bisect", str(exp), "--objects", "--metric", "time", cache=module_cache)
    assert done.returncode == 2 and "time is not bisected" in done.stderr


# -- commit bisection, C repository ----------------------------------------------------------------
LOOP_C = """#include <stdint.h>
/* {note} */
uint64_t loop(uint64_t n);
uint64_t loop(uint64_t n) {{
    uint64_t acc = n;
    for (uint64_t i = 0; i < n; i++)
        for (int j = 0; j < {turns}; j++) {{   /* a dependent chain: time follows the turns */
            acc = acc * 31 + (uint64_t)j;
            __asm__ volatile("" : "+r"(acc));
        }}
    return acc;
}}
"""
LOOP_EXPERIMENT = """name = "loop"
sources = ["loop.c"]
targets = ["x86_64"]
compilers = ["gcc"]
cflags = ["-O2"]
[variants]
default = {}
[[bench]]
name = "loop"
kind = "micro"
function = "loop"
metrics = ["time", "insns"]
"""
SLOW_AT = 3          # the 4th commit of the range makes the loop 10 % longer (10 -> 11 turns)


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "PATH": "/usr/bin:/bin", "HOME": str(repo),
           "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C"}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


def _loop_repo(root: Path, broken: int | None = None) -> tuple[Path, list[str]]:
    """A repository: a good commit, then 8 commits; SLOW_AT makes the loop slower, `broken`
    (an index) does not compile. Returns (experiment path, the 8 commits' shas)."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "experiment.toml").write_text(LOOP_EXPERIMENT)
    (root / "loop.c").write_text(LOOP_C.format(note="good", turns=10))
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "good: a loop of 10 turns")
    _git(root, "tag", "good")
    shas, turns = [], 10
    for i in range(8):
        turns = 11 if i >= SLOW_AT else 10
        note = f"commit {i}" + (" (broken" if i == broken else "")
        text = LOOP_C.format(note=note, turns=turns)
        (root / "loop.c").write_text(text + ("#error broken on purpose\n" if i == broken else ""))
        _git(root, "commit", "-qam", f"step {i}" + (": 11 turns" if i == SLOW_AT else ""))
        shas.append(_git(root, "rev-parse", "HEAD"))
    return root / "experiment.toml", shas


@callgrind
def test_bisect_on_exact_counts_in_log2_n_plus_one_builds(tmp_path, module_cache):
    from flagbench.bisect import commits
    from flagbench.bisect.csubject import CSubject
    exp_path, shas = _loop_repo(tmp_path / "repo")
    exp = spec.load(exp_path)
    subject = CSubject(exp, exp.benches[0], variant=None, target=None, compiler=None, workdir=tmp_path / "w")
    lines: list[str] = []
    opts = commits.Options(metric="insns", threshold=timed.parse_threshold("+5%"))
    out = commits.bisect(subject, "good", "main", opts, lines.append, store=Store(tmp_path / "fb.db"))
    assert out.found.first == SLOW_AT and out.commits[SLOW_AT].sha == shas[SLOW_AT]
    assert out.builds == math.ceil(math.log2(8)) + 1
    assert "first bad commit: " + shas[SLOW_AT] in "\n".join(commits.summary(out, opts))
    # the user's checkout was not touched: still at main, nothing modified
    assert _git(exp_path.parent, "status", "--porcelain") == "" and _git(exp_path.parent, "rev-parse", "HEAD") == shas[-1]


@pytest.mark.slow    # ~70 s here under load: paired rounds
@callgrind
def test_bisect_on_time_finds_the_slower_commit_and_skips_a_broken_one(tmp_path, module_cache):
    """The commit that makes the loop ~10 % slower, found by paired rounds (threshold +5 %);
    the commit before it does not compile and is skipped; exact counts name the same commit."""
    exp_path, shas = _loop_repo(tmp_path / "repo", broken=1)
    done = flagbench("bisect", str(exp_path), "--good", "good", "--bad", "main", "--metric", "time",
                     "--threshold", "+5%", "--seed", "1", "--db", tmp_path / "fb.db", cache=module_cache)
    assert done.returncode == 0, done.stderr
    assert f"first bad commit: {shas[SLOW_AT]}" in done.stdout, done.stdout + done.stderr
    assert "does not build" in done.stderr and ": skip" in done.stderr
    assert "union bound" in done.stdout
    steps = [ln for ln in done.stderr.splitlines() if " step " in ln or ln.startswith("flagbench bisect: step")]
    assert all("% [" in ln for ln in steps if not ln.endswith("skip"))   # each timed step shows its interval
    counts = flagbench("bisect", str(exp_path), "--good", "good", "--bad", "main", "--metric", "insns",
                       "--threshold", "+5%", "--db", tmp_path / "fb.db", cache=module_cache)
    assert counts.returncode == 0 and f"first bad commit: {shas[SLOW_AT]}" in counts.stdout, counts.stderr


@pytest.mark.slow    # ~40 s here under load: git bisect runs flagbench once a step
@callgrind
def test_run_step_drives_git_bisect_run(tmp_path, module_cache):
    from flagbench.bisect.csubject import CSubject
    exp_path, shas = _loop_repo(tmp_path / "repo", broken=5)
    repo = exp_path.parent
    _git(repo, "checkout", "-q", "good")      # the test's own repository: it may check out
    exp = spec.load(exp_path)
    at_good = CSubject(exp, exp.benches[0], variant=None, target=None, compiler=None, workdir=tmp_path / "w")
    good_value = at_good.count(at_good.build(), "insns")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "bisect", "start", "main", "good")
    import os
    import sys
    step = [sys.executable, "-m", "flagbench", "bisect", str(exp_path), "--run-step", "--metric", "insns",
            "--good-value", repr(good_value), "--threshold", "+5%", "--quiet"]
    env = {**os.environ, "FLAGBENCH_CACHE": str(module_cache)}
    done = subprocess.run(["git", "-C", str(repo), "bisect", "run", *step], env=env, capture_output=True, text=True)
    assert f"{shas[SLOW_AT]} is the first bad commit" in done.stdout, done.stdout + done.stderr
    _git(repo, "bisect", "reset")
    # bad input aborts git bisect run (exit 255), it does not call the commit bad
    bad = flagbench("bisect", str(exp_path), "--run-step", "--metric", "insns", cache=module_cache)
    assert bad.returncode == 255 and "--threshold" in bad.stderr


# -- object bisection, kernel ----------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu-system-x86")
def test_kernel_object_bisection_names_the_object_whose_functions_moved(tmp_path):
    """default vs counted (tests/data/kernel: 8 nops in __get_task_comm, fs/exec.c): A's O=
    relinked with B's objects, booted, prctl_name's kernel instructions counted. The object
    named must be the one that defines the functions whose counts moved (nm says which)."""
    from kernel_util import build_test_kernels, test_experiment
    from flagbench.bisect.objects import bisect_objects, summary
    kernels = build_test_kernels(("default", "counted"))
    assert kernels["default"].ok and kernels["counted"].ok
    a_dir = kernels["default"].dir
    before = {rel: (a_dir / rel).stat().st_mtime_ns for rel in ("vmlinux", "fs/exec.o", "fs/built-in.a")}
    lines: list[str] = []
    out = bisect_objects(test_experiment(), ["default", "counted"], metric="insns", bench=None, share=0.8,
                         workdir=tmp_path, say=lines.append)
    # the patch touches fs/exec.c; init/version.o differs too (the build identity), carrying nothing
    assert "fs/exec.o" in out.candidates
    assert out.narrowed.objects == ["fs/exec.o"], "\n".join(lines + summary(out))
    # 8 nops x 20,000 calls, give or take a timer interrupt (they land elsewhere in another kernel)
    assert out.value_b - out.value_a == pytest.approx(160_000, rel=0.05)
    assert out.narrowed.share == pytest.approx(1.0, abs=0.05)
    top, a_count, b_count, where = out.moved[0]
    assert top == "__get_task_comm" and b_count - a_count == pytest.approx(160_000, rel=0.001)
    nm = subprocess.run(["nm", str(kernels["default"].dir / "fs/exec.o")], capture_output=True, text=True,
                        check=True).stdout
    assert " T __get_task_comm" in nm
    # the mixes were relinked by Kbuild in copies: A's own O= directory is as it was
    assert {rel: (a_dir / rel).stat().st_mtime_ns for rel in before} == before
    assert any("relinking" in ln for ln in lines)


# -- a bisection is a stored run ---------------------------------------------------------------------
@callgrind
def test_a_bisection_killed_after_two_steps_measures_no_step_twice(tmp_path, module_cache):
    """kill -9 after two steps, run again: the steps stored are read, not measured again (each
    commit's counted cell holds one sample, in one run); the answer is the clean run's; `report
    --list` names the run a bisect and `report RUN` prints its steps from the store."""
    import os
    import signal
    import sqlite3
    import sys
    import time

    exp_path, shas = _loop_repo(tmp_path / "repo")
    db = tmp_path / "fb.db"
    argv = [sys.executable, "-m", "flagbench", "bisect", str(exp_path), "--good", "good", "--bad", "main",
            "--metric", "insns", "--threshold", "+5%", "--db", str(db)]
    env = {**os.environ, "FLAGBENCH_CACHE": str(module_cache),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    log = tmp_path / "first.err"
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while "step 2:" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the bisection ended before it could be killed: " + log.read_text()
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def counted() -> dict[str, int]:
        with sqlite3.connect(db) as con:
            return dict(con.execute("SELECT cell, count(*) FROM samples WHERE bench = 'loop' "
                                    "AND metric = 'insns_per_iter' GROUP BY cell"))
    before = counted()
    assert len(before) >= 3 and set(before.values()) == {1}, before    # the good end and two steps
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
    assert again.returncode == 0, again.stderr
    assert f"first bad commit: {shas[SLOW_AT]}" in again.stdout
    after = counted()
    assert set(after.values()) == {1} and set(before) <= set(after), after   # none measured twice
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    listed = flagbench("report", "--list", "--db", db)
    assert listed.returncode == 0 and " bisect " in listed.stdout and "good..main" in listed.stdout, listed.stdout
    shown = flagbench("report", "1", "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert shas[SLOW_AT][:12] in shown.stdout and "insns_per_iter" in shown.stdout
