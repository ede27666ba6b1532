"""Exports and checkouts flagbench owns (vcs.py), on git repositories the tests make:

- the user's sparse-checkout settings do not narrow them, and an export made narrow by an
  older flagbench is made again; a submodule's files are exported with their content;
- exports of many commits share what did not change (one large asset is stored once);
- a lock or a temporary a killed flagbench left is removed by the next run;
- a repository git refuses for its owner is named as such (safe.directory), and `:/text`
  revisions are taken.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment
from flagbench import vcs, vcs_export
from flagbench.errors import UserError

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
MAIN_C = '#include "../lib/sq.h"\nint work(int x) { return sq(x) + 1; }\n'
SQ_H = "static inline int sq(int x) { return x * x; }\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "protocol.file.allow=always", *args], check=True,
                          capture_output=True, text=True, env={**os.environ, **GIT_ENV}).stdout.strip()


def _repo(root: Path) -> Path:
    """exp/ (an experiment whose source includes ../lib/sq.h) and lib/, committed; tag base."""
    write_experiment(root / "exp", 'sources = ["main.c"]\n[variants]\ndefault = {}\n', {"main.c": MAIN_C})
    (root / "lib").mkdir()
    (root / "lib" / "sq.h").write_text(SQ_H)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-qm", "base")
    git(root, "tag", "base")
    return root


def test_sparse_checkout_of_the_user_does_not_narrow_an_export(tmp_path):
    repo = _repo(tmp_path / "repo")
    git(repo, "sparse-checkout", "set", "exp")          # the user works on exp/ only
    assert not (repo / "lib" / "sq.h").exists()
    commit = vcs.resolve(repo, "base")
    out = vcs_export.export(commit, tmp_path / "trees" / commit.tree)
    assert (out / "lib" / "sq.h").read_text() == SQ_H and (out / "exp" / "main.c").read_text() == MAIN_C
    # a walked checkout too (a kernel's)
    dest = tmp_path / "walk" / "src"
    vcs.walk(commit, dest)
    assert (dest / "lib" / "sq.h").read_text() == SQ_H
    # and an experiment whose ref reads the commit builds (before: "does not build", sq.h missing)
    write_experiment(tmp_path / "refexp", f'sources = ["{repo}/exp/main.c"]\n[variants]\n'
                     'at_base = { ref = "base" }\n', {})
    done = flagbench("build", tmp_path / "refexp", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr


def test_an_export_an_older_flagbench_made_narrow_is_made_again(tmp_path):
    repo = _repo(tmp_path / "repo")
    commit = vcs.resolve(repo, "base")
    dest = tmp_path / "trees" / commit.tree
    (dest / "exp").mkdir(parents=True)                  # what sparse checkout left: exp/ only
    (dest / "exp" / "main.c").write_text(MAIN_C)
    (dest / vcs.MARKER).write_text(json.dumps({"tree": commit.tree, "commit": commit.sha}))
    assert (vcs_export.export(commit, dest) / "lib" / "sq.h").read_text() == SQ_H


def test_a_submodule_header_is_exported_with_its_content(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "sq.h").write_text(SQ_H)
    git(sub, "init", "-q", "-b", "main")
    git(sub, "add", ".")
    git(sub, "commit", "-qm", "sub")
    repo = tmp_path / "repo"
    write_experiment(repo / "exp", 'sources = ["main.c"]\n[variants]\ndefault = {}\n', {"main.c": MAIN_C})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "submodule", "add", "-q", str(sub), "lib")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "with a submodule")
    commit = vcs.resolve(repo, "HEAD")
    out = vcs_export.export(commit, tmp_path / "trees" / commit.tree)
    assert (out / "lib" / "sq.h").read_text() == SQ_H
    # a clone without the submodule's objects: one clear line, not an empty header
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    c = vcs.resolve(clone, "HEAD")
    with pytest.raises(UserError, match="git submodule update --init lib"):
        vcs_export.export(c, tmp_path / "trees2" / c.tree)


def _disk_bytes(*dirs: Path) -> int:
    """Bytes the directories take, a hard-linked file counted once (as du does)."""
    seen, total = set(), 0
    for d in dirs:
        for root, _, files in os.walk(d):
            for f in files:
                st = os.lstat(os.path.join(root, f))
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def test_exports_of_six_commits_store_an_unchanged_asset_once(tmp_path):
    repo = _repo(tmp_path / "repo")
    asset = os.urandom(8 << 20)
    (repo / "asset.bin").write_bytes(asset)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "an 8 MB asset")
    for i in range(5):
        (repo / "exp" / "main.c").write_text(MAIN_C + f"/* {i} */\n")
        git(repo, "commit", "-qam", f"step {i}")
    trees, store = tmp_path / "trees", tmp_path / "blobs"
    for c in vcs.commits(repo, "base", "main"):
        out = vcs_export.export(c, trees / c.tree, store)
        assert (out / "asset.bin").stat().st_size == len(asset)
    assert len([p for p in trees.iterdir() if p.is_dir()]) == 6
    assert _disk_bytes(trees, store) < 1.2 * len(asset)     # before: 6 copies, 48 MB
    assert all(p.stat().st_mode & 0o222 == 0 for p in store.rglob("*") if p.is_file())   # shared: read-only


def test_what_a_killed_flagbench_left_is_recovered(tmp_path):
    repo = _repo(tmp_path / "repo")
    commit = vcs.resolve(repo, "base")
    # Ctrl-C during a kernel walk's first checkout: git's lock on flagbench's private index
    dest = tmp_path / "walk" / "src"
    dest.mkdir(parents=True)
    (tmp_path / "walk" / "src.index.lock").write_text("")
    (tmp_path / "walk" / "src.index.owner").write_text("%08x%016x\n" % (2**22 + 1, 1))   # a dead process
    assert vcs.walk(commit, dest) == [] and (dest / "lib" / "sq.h").is_file()
    assert not (tmp_path / "walk" / "src.index.lock").exists()
    # kill -9 during a C export: its temporary tree and index lock
    trees = tmp_path / "trees"
    (trees / f"{commit.tree}.tmp-99999999" / "exp").mkdir(parents=True)
    (trees / f"{commit.tree}.tmp-99999999.index.lock").write_text("")
    vcs_export.export(commit, trees / commit.tree, tmp_path / "blobs")
    assert sorted(p.name for p in trees.iterdir()) == [commit.tree, f"{commit.tree}.lock"]


def test_a_repository_git_refuses_is_named_for_safe_directory(tmp_path):
    repo = _repo(tmp_path / "repo")
    env = {"GIT_TEST_ASSUME_DIFFERENT_OWNER": "1"}      # git's own knob: as if another user owned it
    done = flagbench("series", repo / "exp", "base..main", cache=tmp_path / "cache", env=env)
    assert done.returncode == 2 and "safe.directory" in done.stderr, done.stderr
    assert "not in a git repository" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_text_revisions_are_taken(tmp_path):
    repo = _repo(tmp_path / "repo")
    (repo / "lib" / "sq.h").write_text(SQ_H + "/* two */\n")
    git(repo, "commit", "-qam", "lib: a second comment line")
    (repo / "lib" / "sq.h").write_text(SQ_H + "/* three */\n")
    git(repo, "commit", "-qam", "lib: a third")
    c = vcs.resolve(repo, ":/second comment")
    assert c.subject == "lib: a second comment line" and c.sha == git(repo, "rev-parse", "HEAD~1")
    with pytest.raises(vcs.UnknownRef):
        vcs.resolve(repo, ":/no such text")
    with pytest.raises(vcs.UnknownRef):
        vcs.resolve(repo, "main with space")
