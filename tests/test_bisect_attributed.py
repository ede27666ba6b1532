"""`flagbench bisect` on the attributed change (bisect/attributed.py), with real parts: gcc,
callgrind, asm compare and a git repository the test makes.

The program's `lane` does 300 more turns a call when bit 4 of its own address is set, so its count
moves with layout alone. One commit grows `unrelated` (never run, linked before `lane`) by 16
bytes: `lane` moves by 16, and the bench's total count moves by ~1,200 instructions an iteration
while no code it runs changed. A later commit adds 3 turns to `loop`, the measured function: a
few instructions. The good end relinked with padding moves `lane` too (the relinks' pads are odd
multiples of 16), so its A/A floor covers the layout commit's move. Bisected on the attributed
change (the default) the answer is the loop's commit, whose cause is direct; with --on total it
is the layout commit, as before.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from conftest import flagbench
from test_bisect import _git

callgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (callgrind)")

PROGRAM = """#include <stdint.h>
/* {note} */
uint64_t unrelated(uint64_t x);
uint64_t lane(uint64_t acc);
uint64_t loop(uint64_t n);
uint64_t unrelated(uint64_t x) {{   /* never run: it only sits before lane */
    __asm__ volatile("{grow}");
    return x * 3 + 1;
}}
__attribute__((noinline)) uint64_t lane(uint64_t acc) {{   /* its work depends on where it landed */
    uint64_t turns = ((uintptr_t)&lane >> 4) & 1 ? 300 : 0;
    for (uint64_t j = 0; j < turns; j++) {{
        acc = acc * 31 + j;
        __asm__ volatile("" : "+r"(acc));
    }}
    return acc;
}}
uint64_t loop(uint64_t n) {{
    uint64_t acc = n;
    for (uint64_t i = 0; i < n; i++) {{
        acc = lane(acc);
        for (int j = 0; j < {turns}; j++) {{
            acc = acc * 31 + (uint64_t)j;
            __asm__ volatile("" : "+r"(acc));
        }}
    }}
    return acc;
}}
"""
EXPERIMENT = """name = "lane"
sources = ["loop.c"]
targets = ["x86_64"]
compilers = ["gcc"]
cflags = ["-O2", "-fno-toplevel-reorder"]     # functions in source order: unrelated, lane, loop
[variants]
default = {}
[[bench]]
name = "loop"
kind = "micro"
function = "loop"
metrics = ["insns"]
"""
LAYOUT, DIRECT = 1, 3        # indexes in the range: the commit that grows `unrelated`, the one that grows `loop`


def _repo(root: Path) -> tuple[Path, list[str]]:
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "experiment.toml").write_text(EXPERIMENT)
    (root / "loop.c").write_text(PROGRAM.format(note="good", grow="", turns=10))
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "good")
    _git(root, "tag", "good")
    shas, grow, turns = [], "", 10
    for i in range(5):
        subject = f"commit {i}: a comment"
        if i == LAYOUT:
            grow, subject = ".skip 16, 0x90", "unrelated: 16 bytes longer (layout only)"
        if i == DIRECT:
            turns, subject = 13, "loop: 3 more turns"
        (root / "loop.c").write_text(PROGRAM.format(note=f"commit {i}", grow=grow, turns=turns))
        _git(root, "commit", "-qam", subject)
        shas.append(_git(root, "rev-parse", "HEAD"))
    return root / "experiment.toml", shas


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return _repo(tmp_path_factory.mktemp("bisect-attributed") / "repo")


def _step(stderr: str, sha: str) -> str:
    return next(ln for ln in stderr.splitlines() if ln.startswith("flagbench bisect: step ") and sha[:12] in ln)


@callgrind
def test_the_attributed_change_names_the_measured_function_s_commit_not_the_layout_one(repo, tmp_path):
    exp, shas = repo
    cache = tmp_path / "cache"
    done = flagbench("bisect", exp, "--good", "good", "--bad", "main", "--db", tmp_path / "a.db", cache=cache)
    assert done.returncode == 0, done.stderr
    assert f"first bad commit: {shas[DIRECT]} loop: 3 more turns" in done.stdout, done.stdout + done.stderr
    assert "threshold on the attributed change" in done.stdout
    floor = next(ln for ln in done.stderr.splitlines() if "A/A floor" in ln)
    assert float(floor.split("A/A floor ")[1].split()[0].replace(",", "")) >= 900   # lane's 300 turns moved
    # the layout commit: measured, its total far past the threshold, its attributed change none
    layout = _step(done.stderr, shas[LAYOUT])
    assert "attributed +0.00 %" in layout and layout.endswith(": good"), layout
    total = float(layout.split("total ")[1].split(" %")[0])
    assert abs(total) > 50, layout
    lines = done.stderr.splitlines()
    assert lines[lines.index(layout) + 1].startswith("flagbench bisect:   cause: layout: no changed code ran")
    direct = _step(done.stderr, shas[DIRECT])
    assert direct.endswith(": bad") and "cause: direct: loop +" in lines[lines.index(direct) + 1], direct
    assert all(len(ln) <= 100 for ln in done.stdout.splitlines())

    # again into the same store: every step is stored, so nothing is profiled, the good end
    # included (its profile and relinked floor: a kernel's good end boots twice). A valgrind
    # that fails stands first in PATH: a profile taken now would end the bisection.
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "valgrind").write_text(f"#!/bin/sh\ntouch {tmp_path / 'profiled'}\nexit 1\n")
    (shim / "valgrind").chmod(0o755)
    again = flagbench("bisect", exp, "--good", "good", "--bad", "main", "--db", tmp_path / "a.db", cache=cache,
                      env={"PATH": f"{shim}:{os.environ['PATH']}"})
    assert again.returncode == 0, again.stderr
    assert not (tmp_path / "profiled").exists(), again.stderr
    first_bad = next(ln for ln in done.stdout.splitlines() if ln.startswith("first bad commit"))
    assert first_bad in again.stdout.splitlines(), again.stdout
    assert ": 0 steps measured now, the rest stored" in again.stdout, again.stdout
    steps = [ln for ln in done.stderr.splitlines() if ln.startswith(("flagbench bisect: step", "flagbench bisect:   cause"))]
    assert [ln for ln in again.stderr.splitlines() if ln in steps] == steps, again.stderr   # causes and totals kept
    assert floor in again.stderr.splitlines()   # the floor, said from the stored good step

    # on the total, as before: the layout commit
    done = flagbench("bisect", exp, "--good", "good", "--bad", "main", "--on", "total", "--db", tmp_path / "t.db",
                     cache=cache)
    assert done.returncode == 0, done.stderr
    assert f"first bad commit: {shas[LAYOUT]} unrelated: 16 bytes longer" in done.stdout, done.stdout
    assert "attributed" not in done.stdout + done.stderr


@callgrind
def test_a_run_step_on_the_layout_commit_is_good_unless_on_the_total(repo, tmp_path):
    exp, shas = repo
    _git(exp.parent, "checkout", "-q", shas[LAYOUT])    # the test's own repository: it may check out
    try:
        step = ["--run-step", "--good", "good", "--threshold", "+5%"]
        attributed = flagbench("bisect", exp, *step, cache=tmp_path / "cache")
        total = flagbench("bisect", exp, *step, "--on", "total", cache=tmp_path / "cache")
    finally:
        _git(exp.parent, "checkout", "-q", "main")
    assert attributed.returncode == 0 and "cause: layout" in attributed.stderr, attributed.stderr
    assert total.returncode in (0, 1) and "attributed" not in total.stderr
    # the total moved ~1,200 insns one way or the other: +5 % (worse) is past it only when it grew
    moved_up = "(+" in total.stderr.split(" against ")[1]     # "V insns against G (+x %): verdict"
    assert total.returncode == (1 if moved_up else 0), total.stderr


def test_on_attributed_takes_insns_only(repo, tmp_path):
    exp, _ = repo
    done = flagbench("bisect", exp, "--good", "good", "--bad", "main", "--metric", "size", "--on", "attributed",
                     "--db", tmp_path / "fb.db", cache=tmp_path / "cache")
    assert done.returncode == 2 and "--on attributed" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
