"""The real b4 (pinned in pyproject's test extras) with flagbench: `b4 am -o DIR -m MBOX` (offline,
a local mbox) writes the .mbx that `flagbench series --mbox` takes, and `b4 am --check` runs
`flagbench check` as its per-patch check command (`am-perpatch-check-cmd`, the line docs/mail.md
shows) and prints what it said beside each patch. Repositories and mails from test_mail's
fixtures: v1 is helper (+58 B, over the +1% size budget), a comment (nothing moves), xor (+13 B).
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CACHE_ENV, ROOT
from test_mail import V1, git, repo  # noqa: F401  (a module fixture used here)
from test_series import repo_state

B4 = Path(sys.executable).parent / "b4"
pytestmark = pytest.mark.skipif(not B4.is_file(), reason="b4 is not installed: make venv (pyproject's test extras)")


@pytest.fixture(scope="module")
def thread(repo, tmp_path_factory) -> tuple[Path, str]:
    """v1 as a list carries it: `git format-patch --thread --cover-letter --base`, each mail with
    a Message-ID and the patches replies to the cover's; (the mbox, the cover's Message-ID)."""
    mbox = tmp_path_factory.mktemp("b4") / "v1.mbx"
    mbox.write_text(git(repo, "format-patch", "--stdout", "--thread", "--cover-letter", "--base=base", "base..v1"))
    msgid = re.search(r"(?im)^Message-ID: <([^>]+)>", mbox.read_text()).group(1)
    return mbox, msgid


def run_b4(where: Path, home: Path, config: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """b4 ARGS in WHERE with its own HOME, cache and git config (CONFIG: b4.KEY = VALUE), no
    network: attestation off, nothing looked up on lore."""
    gitconfig = home / "gitconfig"
    gitconfig.write_text("[b4]\n" + "".join(f"\t{k} = {v}\n" for k, v in
                                           {"attestation-policy": "off", **config}.items())
                         + "[user]\n\tname = t\n\temail = t@example.org\n")
    env = {k: v for k, v in os.environ.items() if k != CACHE_ENV}
    env.update({"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache"),
           "XDG_CONFIG_HOME": str(home / "config"), "GIT_CONFIG_GLOBAL": str(gitconfig),
           "GIT_CONFIG_NOSYSTEM": "1", "PATH": f"{B4.parent}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT / "src")})
    return subprocess.run([str(B4), "--offline-mode", *args], cwd=where, capture_output=True, text=True, env=env, timeout=900)


def test_b4_am_writes_the_mbx_that_series_takes(repo, thread, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    before = repo_state(repo)
    done = run_b4(repo, home, {}, "am", "--no-cache", "-m", str(thread[0]), "-o", str(tmp_path / "out"), thread[1])
    assert done.returncode == 0, done.stderr
    (mbx,) = (tmp_path / "out").glob("*.mbx")
    assert repo_state(repo) == before
    series = subprocess.run([sys.executable, "-m", "flagbench", "series", str(repo / "exp"), "--mbox", str(mbx),
                             "--base", "base", "--format", "json", "--db", str(tmp_path / "fb.db")],
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "PYTHONPATH": str(ROOT / "src"), CACHE_ENV: str(home / "cache")})
    assert series.returncode == 0, series.stderr
    rows = json.loads(series.stdout)["rows"]
    assert [r["subject"] for r in rows[1:]] == [s for s, _ in V1]
    # b4 rewrites the mails (trailers, its own headers): git am still makes the author's trees
    assert [r["tree"] for r in rows[1:]] == [git(repo, "rev-parse", f"v1~{n}^{{tree}}").strip() for n in (2, 1, 0)]
    assert [r["vs_parent"]["total"] for r in rows[1:]] == [58, 0, 13]


def test_b4_am_check_runs_flagbench_check_per_patch_and_shows_it(repo, thread, tmp_path):
    """The configuration line of docs/mail.md, as b4 0.16 reads it: b4 runs the command in the
    repository's top directory with each patch on stdin and shows its lines under the patch
    (ERROR: a failure, no output and exit 0: "passed all checks")."""
    home = tmp_path / "home"
    home.mkdir()
    command = f"flagbench check {shlex.quote(str(repo / 'exp'))} -q --format checkpatch --base base"
    before = repo_state(repo)
    done = run_b4(repo, home, {"am-perpatch-check-cmd": command},
                  "am", "--check", "-m", str(thread[0]), "-o", str(tmp_path / "out"), thread[1])
    assert done.returncode == 0, done.stderr
    assert repo_state(repo) == before
    print(done.stdout + done.stderr)      # docs/mail.md shows this
    # flagbench check's cache and results: the user's cache directory, not the checkout b4 ran it in
    assert (home / "cache" / "flagbench" / "mail" / "check.db").is_file()
    said = done.stdout + done.stderr
    lines = said.splitlines()
    at = {s: next(i for i, line in enumerate(lines) if s in line and "flagbench" not in line) for s, _ in V1}
    helper, comment, xor = (lines[at[s] + 1:at[s] + 4] for s, _ in V1)
    name = "flagbench"      # b4 names the command by its first word
    assert any(f"{name}: ERROR: flagbench: size +58 B" in line for line in helper), said
    assert any(f"{name}: passed all checks" in line for line in comment), said
    assert any(f"{name}: ERROR: flagbench: size +13 B" in line for line in xor), said


def test_b4_prep_check_runs_flagbench_check_on_each_commit_of_the_prep_branch(repo, tmp_path):
    """`b4 prep --check` (a contributor's side): `prep-perpatch-check-cmd`, the same line, run on
    each commit of a b4 prep branch (made in a clone: b4 prep writes branches and commits)."""
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    command = f"flagbench check {shlex.quote(str(work / 'exp'))} -q --format checkpatch --base base"
    made = run_b4(work, home, {"prep-perpatch-check-cmd": command}, "prep", "-n", "sum", "-f", "base")
    assert made.returncode == 0, made.stderr
    git(work, "cherry-pick", "base..origin/v1")
    done = run_b4(work, home, {"prep-perpatch-check-cmd": command}, "prep", "--check")
    said = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)
    assert f"  {command}" in said, said
    lines = said.splitlines()
    at = {s: next(i for i, line in enumerate(lines) if line.endswith(f": {s}")) for s, _ in V1}
    assert "flagbench: ERROR: flagbench: size +58 B" in lines[at[V1[0][0]] + 1]
    assert at[V1[2][0]] == at[V1[1][0]] + 1                     # the comment: passed, no lines under it
    assert "flagbench: ERROR: flagbench: size +13 B" in lines[at[V1[2][0]] + 1]
    assert "Success: 1, Warning: 0, Error: 5" in said
    assert (home / "cache" / "flagbench" / "mail" / "check.db").is_file()
