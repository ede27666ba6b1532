"""`flagbench bisect`'s arguments and its skipping, on git repositories the tests make:

- every error of a `--run-step` invocation exits 255 (git bisect run stops), never 2 ("bad");
- --good-value, --jobs and --threshold are checked (a bare threshold number is percent);
- a commit whose bench crashes is skipped and named, not the end of the bisection; the
  result's lines fit 100 columns and a commit subject's escape sequences reach nobody raw;
- `git bisect run` on a kernel experiment builds the tree as checked out (a stand-in kernel
  tree: a git repository whose Makefile answers Kbuild's targets with gcc, no Linux build).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import flagbench
from kernel_util import STAND_IN_KBUILD
from flagbench.bisect import timed
from test_bisect import LOOP_C, LOOP_EXPERIMENT, _git

callgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (callgrind)")
LONG = "step 3: 11 turns, " + "and a subject much longer than a mail's line " * 3 + "\x1b[31mred\x07"
CRASH = 1            # the 2nd commit of the range traps in its loop: its bench does not run


def _repo(root: Path) -> tuple[Path, list[str]]:
    """good, then 8 commits: the 4th makes the loop longer (its subject long, with an ESC and
    a BEL), the 2nd makes the loop trap (it builds, its bench crashes)."""
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "experiment.toml").write_text(LOOP_EXPERIMENT)
    (root / "loop.c").write_text(LOOP_C.format(note="good", turns=10))
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "good: a loop of 10 turns")
    _git(root, "tag", "good")
    shas = []
    for i in range(8):
        text = LOOP_C.format(note=f"commit {i}", turns=11 if i >= 3 else 10)
        if i == CRASH:
            text = text.replace("uint64_t acc = n;", "uint64_t acc = n;\n    if (n) __builtin_trap();")
        (root / "loop.c").write_text(text)
        _git(root, "commit", "-qam", LONG if i == 3 else f"step {i}")
        shas.append(_git(root, "rev-parse", "HEAD"))
    return root / "experiment.toml", shas


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return _repo(tmp_path_factory.mktemp("bisect-cli") / "repo")


@pytest.mark.parametrize("args", [
    ["--threshold", "-5%"],                  # a negative value after a space: argparse's error
    ["--threshold", "+5%", "--jobs", "x"],
    ["--threshold", "+5%", "--no-such-option"],
    ["--threshold", "fast"],
    ["--threshold", "+5%", "--good-value", "nan"],
    ["--threshold", "+5%", "--good-value", "inf"],
    ["--threshold", "+5%", "--good-value", "-75"],
    ["--threshold", "+5%", "--good-value", "0"],
    ["--threshold", "+5%", "--good-value", "10", "--jobs", "0"],
])
def test_every_error_of_a_run_step_exits_255(repo, tmp_path, args):
    exp, _ = repo
    done = flagbench("bisect", exp, "--run-step", "--metric", "insns", *args, cache=tmp_path / "cache")
    assert done.returncode == 255, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.o"))   # nothing built


def test_bad_numbers_without_run_step_exit_2(repo, tmp_path):
    exp, _ = repo
    for args, said in ((["--jobs", "0"], "--jobs"), (["--jobs", "-1"], "--jobs"),
                       (["--threshold", "0"], "threshold"), (["--no-such-option"], "unrecognized")):
        done = flagbench("bisect", exp, "--good", "good", "--bad", "main", *args, cache=tmp_path / "cache")
        assert done.returncode == 2 and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    done = flagbench("bisect", exp, "--good", "good", "--bad", "main", "--threshold=-5%", "--jobs", "0",
                     cache=tmp_path / "cache")
    assert done.returncode == 2 and "--jobs 0" in done.stderr     # =-5% itself was taken


def test_a_bare_threshold_is_percent():
    assert timed.parse_threshold("5") == timed.parse_threshold("5%") == timed.Threshold(0.05, 0)
    assert timed.parse_threshold("+5") == timed.parse_threshold("+5%") == timed.Threshold(0.05, 1)
    assert timed.parse_threshold("-2.5") == timed.Threshold(0.025, -1)
    assert str(timed.parse_threshold("+5")) == "+5 %"
    for bad in ("", "%", "+", "0", "1000", "nan", "5 %%"):
        with pytest.raises(ValueError):
            timed.parse_threshold(bad)


@callgrind
def test_a_commit_whose_bench_crashes_is_skipped_and_named(repo, tmp_path):
    exp, shas = repo
    done = flagbench("bisect", exp, "--good", "good", "--bad", "main", "--metric", "insns", "--threshold", "+5",
                     cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    first = next(ln for ln in lines if ln.startswith("first bad commit: "))
    assert first.startswith(f"first bad commit: {shas[3]} step 3: 11 turns")
    assert f"skipped {shas[CRASH][:12]}: does not run" in done.stdout, done.stdout
    assert "does not run" in done.stderr and ": skip" in done.stderr
    assert all(len(ln) <= 100 for ln in lines), lines
    assert "\x1b" not in done.stdout + done.stderr and "\x07" not in done.stdout + done.stderr
    # and as a `git bisect run` step: 125, the commit skipped, not called bad
    _git(exp.parent, "checkout", "-q", shas[CRASH])
    try:
        step = flagbench("bisect", exp, "--run-step", "--metric", "insns", "--good-value", "1000",
                         "--threshold", "+5%", cache=tmp_path / "cache")
    finally:
        _git(exp.parent, "checkout", "-q", "main")
    assert step.returncode == 125 and "does not run" in step.stderr, step.stderr


# -- git bisect run on a kernel experiment ---------------------------------------------------------
# A stand-in for a kernel tree: Kbuild's targets as flagbench calls them (make -C SRC O=DIR ...):
# tinyconfig writes an empty .config (the asked options are merged in after it), olddefconfig
# keeps it, `all` compiles f.c into "vmlinux" (an ELF file with code symbols: --metric size reads them).
MAKEFILE = STAND_IN_KBUILD + """\t$(CC) -O2 -c f.c -o $(O)/vmlinux
\t: > $(O)/System.map
"""
F_C = "int f(int x);\nint f(int x) {{\n{body}    return x;\n}}\n"


def _kernel_repo(root: Path) -> list[str]:
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "Makefile").write_text(MAKEFILE)
    (root / "Kconfig").write_text("")
    (root / "f.c").write_text(F_C.format(body="    x = x * 7 + 1;\n"))
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "base")
    _git(root, "tag", "base")
    shas = []
    for i in range(6):   # the 4th grows f by a lot, the 2nd does not compile
        body = "    x = x * 7 + 1;\n" * (40 if i >= 3 else 1) + ("    this does not compile\n" if i == 1 else "")
        (root / "f.c").write_text(F_C.format(body=body) + f"/* {i} */\n")
        _git(root, "commit", "-qam", f"f: step {i}")
        shas.append(_git(root, "rev-parse", "HEAD"))
    return shas


def test_git_bisect_run_on_a_kernel_experiment_builds_the_checked_out_tree(tmp_path):
    src = tmp_path / "linux"
    shas = _kernel_repo(src)
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "experiment.toml").write_text(f'name = "k"\ntargets = ["x86_64"]\n[kernel]\nsource = "{src}"\n'
                                         'config = "tinyconfig"\n[variants]\ndefault = {}\n')
    env = {**os.environ, "FLAGBENCH_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(Path(__file__).parent.parent / "src")}
    _git(src, "bisect", "start", "main", "base")
    step = [sys.executable, "-m", "flagbench", "bisect", str(exp), "--run-step", "--metric", "size",
            "--good", "base", "--threshold", "+50%", "--quiet"]
    done = subprocess.run(["git", "-C", str(src), "bisect", "run", *step], env=env, capture_output=True, text=True,
                          timeout=600)
    _git(src, "bisect", "reset")
    assert f"{shas[3]} is the first bad commit" in done.stdout, done.stdout + done.stderr
    # the tree was only read: nothing of the builds in it
    assert _git(src, "status", "--porcelain", "--ignored") == ""
