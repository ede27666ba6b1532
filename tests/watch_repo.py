"""The C history tests/test_watch.py and bench/watch_speed.py watch: dozens of commits on
branch main, each of one kind, with the kinds known here (the oracle is the plan, not the code
under test):
    unrelated  a function of other.c that the bench never calls changes (or one is added)
    loop       the measured loop (sum_loop in loop.c) changes: its counts move
    layout     a new function is put before sum_loop in loop.c: its address moves, not its code
    broken     other.c does not compile (the next commit mends it)
"""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}

LOOP_C = """\
#include <stdint.h>
/* PAD */
uint64_t sum_loop(uint64_t n)
{
\tvolatile uint64_t acc = 0;
\tfor (uint64_t i = 0; i < n; i++) {
\t\tacc += i;
\t\t/* STEP */
\t}
\treturn acc;
}
"""
OTHER_C = """\
#include <stdint.h>
int unrelated_0(int x)
{
\treturn x + 0;
}
/* MORE */
"""
EXPERIMENT = """\
sources = ["loop.c", "other.c"]
[variants]
default = {{ cflags = ["-O2"] }}
[[bench]]
name = "sum"
kind = "micro"
function = "sum_loop"
metrics = [{metrics}]
samples = 3
warmup = 0
"""
LOOP_STEPS = ["\t\tacc ^= i;\n", "\t\tacc += i >> 3;\n", "\t\tacc -= 1;\n", "\t\tacc ^= i << 1;\n"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def plan(n: int) -> list[str]:
    """N commit kinds: loop changes at a few places, layout moves, one broken then mended."""
    kinds = ["unrelated"] * n
    for i, k in ((n // 5, "loop"), (n // 5 + 3, "layout"), (n // 2, "broken"), (n // 2 + 1, "mend"),
                 (n // 2 + 4, "loop"), (2 * n // 3, "layout"), (n - 4, "loop")):
        kinds[i] = k
    return kinds


def make(root: Path, n: int = 30, timed: bool = True) -> tuple[Path, dict[str, str]]:
    """(repository, {sha: kind}) with the experiment in exp/ and N commits after tag `base`."""
    repo = root / "repo"
    (repo / "exp").mkdir(parents=True)
    metrics = '"insns", "time"' if timed else '"insns"'
    (repo / "exp" / "experiment.toml").write_text(EXPERIMENT.format(metrics=metrics))
    (repo / "exp" / "loop.c").write_text(LOOP_C)
    (repo / "exp" / "other.c").write_text(OTHER_C)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    kinds = {}
    loops = layouts = 0
    for i, kind in enumerate(plan(n)):
        loop, other = repo / "exp" / "loop.c", repo / "exp" / "other.c"
        if kind == "unrelated":
            other.write_text(other.read_text().replace(
                "/* MORE */", f"int unrelated_{i + 1}(int x)\n{{\n\treturn x * {i + 2} + {i};\n}}\n/* MORE */"))
            subject = f"other: unrelated_{i + 1}"
        elif kind == "loop":
            loop.write_text(loop.read_text().replace("\t\t/* STEP */\n", LOOP_STEPS[loops] + "\t\t/* STEP */\n"))
            loops += 1
            subject = f"loop: step {loops}"
        elif kind == "layout":
            layouts += 1
            body = "\n".join(f"\tx = x * {j + 3} + {layouts};" for j in range(12 * layouts))
            loop.write_text(loop.read_text().replace(
                "/* PAD */", f"/* PAD */\nint pad_{layouts}(int x)\n{{\n{body}\n\treturn x;\n}}"))
            subject = f"loop.c: pad_{layouts} before sum_loop"
        elif kind == "broken":
            other.write_text(other.read_text().replace("/* MORE */", "int broken(int x) { return x +; }\n/* MORE */"))
            subject = "other: broken"
        else:
            other.write_text(other.read_text().replace("int broken(int x) { return x +; }\n", ""))
            subject = "other: mend the build"
        git(repo, "commit", "-q", "-a", "-m", subject)
        kinds[git(repo, "rev-parse", "HEAD").strip()] = kind
    return repo, kinds
