"""Series faults found by trying it (issue 44), on small C repositories the tests make: a merge
is compared with its first parent (not the row printed before it), a BASE that is not an ancestor
of HEAD is refused in one line, and a series where no commit after the base builds fails."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment

EXPERIMENT = """\
sources = ["f.c"]
[variants]
default = {}
"""
F_C = "int f(int x)\n{\n\treturn x + 1;\n}\n"
BIG = "\nint g(int x)\n{\n\tint s = 0;\n\tfor (int i = 0; i < x; i++)\n\t\ts += i * x ^ (s >> 3);\n\treturn s;\n}\n"


class Repo:
    def __init__(self, root: Path):
        self.root, self.tick = root, 0
        write_experiment(root / "exp", EXPERIMENT, {"f.c": F_C})
        self.git("init", "-q", "-b", "main")
        self.commit("base", add=True)
        self.git("tag", "base")

    def git(self, *args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
               "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_DATE": f"@{1700000000 + self.tick} +0000",
               "GIT_COMMITTER_DATE": f"@{1700000000 + self.tick} +0000"}
        self.tick += 10
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, capture_output=True, text=True,
                              env=env).stdout.strip()

    def commit(self, subject: str, text: str | None = None, add: bool = False) -> str:
        if text is not None:
            (self.root / "exp" / "f.c").write_text(text)
        if add:
            self.git("add", ".")
        self.git("commit", "-q", "-a", "--allow-empty", "-m", subject)
        return self.git("rev-parse", "--short=12", "HEAD")


def series(repo: Repo, tmp_path: Path, rng: str, *more: str):
    return flagbench("series", repo.root / "exp", rng, "--no-counts", "--db", tmp_path / "fb.db", *more,
                     cache=tmp_path / "cache", timeout=600)


def test_a_merge_is_compared_with_its_first_parent_and_says_so(tmp_path):
    repo = Repo(tmp_path / "repo")
    one = repo.commit("one: f adds two", F_C.replace("x + 1", "x + 2"))
    repo.git("checkout", "-q", "-b", "side")
    grown = repo.commit("side: g", F_C.replace("x + 1", "x + 2") + BIG)
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = repo.git("rev-parse", "--short=12", "HEAD")
    done = series(repo, tmp_path, "base..main", "--format", "json")
    assert done.returncode == 0, done.stderr
    rows = {r["short"]: r for r in json.loads(done.stdout)["rows"]}
    assert list(rows)[1:] == [one, grown, merge]     # side's commit printed right before the merge
    assert rows[grown]["compared_with"] == one
    assert rows[merge]["compared_with"] == one       # its first parent, not the row before it
    assert rows[merge]["vs_parent"]["total"] == rows[grown]["vs_parent"]["total"] > 0
    assert rows[merge]["vs_parent"]["add"] == 1      # g arrives on main with the merge
    text = series(repo, tmp_path, "base..main").stdout
    assert f"(a merge: compared with its first parent {one})" in text


def test_a_base_that_is_not_an_ancestor_of_head_is_refused(tmp_path):
    repo = Repo(tmp_path / "repo")
    repo.git("checkout", "-q", "-b", "other")
    repo.commit("other: g", F_C + BIG)
    repo.git("checkout", "-q", "main")
    repo.commit("one", F_C.replace("x + 1", "x + 2"))
    done = series(repo, tmp_path, "other..main")
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "other is not an ancestor of main" in done.stderr and "merge-base" in done.stderr


@pytest.mark.parametrize("what", ["compile", "checkout"])
def test_a_series_where_no_commit_after_the_base_builds_fails(tmp_path, what):
    repo = Repo(tmp_path / "repo")
    repo.commit("broken", F_C.replace("x + 1;", "x + 1"))
    if what == "checkout":     # the source itself goes: the commit cannot be read, let alone built
        repo.git("rm", "-q", "exp/f.c")
        repo.commit("gone")
        (repo.root / "exp" / "f.c").write_text(F_C)   # the work tree has it (untracked): the experiment loads
    done = series(repo, tmp_path, "base..main")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "does not build" in done.stdout


def test_subjects_and_errors_reach_the_terminal_and_the_markdown_escaped(tmp_path):
    repo = Repo(tmp_path / "repo")
    hostile = "evil \x1b[31mred\x07 <img src=x onerror=alert(1)> | <script>"
    repo.commit(hostile, F_C.replace("x + 1;", "x + 1; /* \x1b[2J */ }"))   # and an error quoting it
    repo.commit("fine", F_C.replace("x + 1", "x + 3"))
    text = series(repo, tmp_path, "base..main")
    assert text.returncode == 0, text.stderr
    assert "\x1b" not in text.stdout + text.stderr and "\x07" not in text.stdout + text.stderr
    assert "\\x1b[31mred\\x07" in text.stdout
    md = series(repo, tmp_path, "base..main", "--format", "md")
    assert md.returncode == 0, md.stderr
    # markdown shows the table as code: the subject is in its fence, shown and never rendered
    assert "evil \\x1b[31mred\\x07 <img" in md.stdout and "\x1b" not in md.stdout
    assert not re.search(r"<(img|script)", outside_fences(md.stdout))
    shown = flagbench("report", "--db", tmp_path / "fb.db", "--format", "md")
    assert shown.returncode == 0 and "evil \\x1b[31mred" in shown.stdout and "\x1b" not in shown.stdout
    assert not re.search(r"(?<!\\)<(img|script)", outside_fences(shown.stdout))


def outside_fences(md: str) -> str:
    """MD without its fenced code blocks (a fence: a line of three or more backticks)."""
    return re.sub(r"^(`{3,})\n.*?^\1\n", "", md, flags=re.M | re.S)
