"""kbuild/seed.py's choices for git checkouts, on a real git repository: which files a copied O=
directory must rebuild when a checkout starts from another checkout's build, including after a
walk whose make failed (the plan and its tree stand in for a kernel build: the kernel builds
themselves are in test_watch_kernel's object checkouts)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

from flagbench import vcs
from flagbench.kbuild import seed


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _repo(tmp_path: Path) -> tuple[Path, dict[str, vcs.Commit]]:
    """base; sys.c changed (good); sys.c broken and util.h changed (the walk that fails); a Kconfig."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    steps = {"base": {"kernel/sys.c": "int a;\n", "lib/string.c": "int s;\n", "include/util.h": "#define U 1\n",
                      "Kconfig": "config A\n"},
             "good": {"kernel/sys.c": "int a, b;\n"},
             "broken": {"kernel/sys.c": "int a, b, ;\n", "include/util.h": "#define U 2\n"},
             "kconfig": {"Kconfig": "config A\nconfig B\n"}}
    commits = {}
    for name, files in steps.items():
        for rel, text in files.items():
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_text(text)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", name)
        commits[name] = vcs.resolve(repo, "HEAD")
    return repo, commits


def _plan(commit: vcs.Commit, src: str = "/checkout/a"):
    return SimpleNamespace(tree=SimpleNamespace(commit=commit, src=Path(src), changed=()))


def test_a_checkout_rebuilds_the_commits_difference_and_what_a_failed_walk_left(tmp_path):
    _, c = _repo(tmp_path)
    good = seed.recorded(_plan(c["good"]), "K")
    assert good[seed.TREE] == c["good"].tree and good[seed.STALE] == []
    # another checkout at base, started from the walk's good build: sys.c differs
    assert seed._differing(_plan(c["base"], "/checkout/b"), {**good, "ok": True}) == ["kernel/sys.c"]

    # the walk moves to broken and its make fails: what changed since the good build may be older there
    failed = seed.recorded_failure(_plan(c["broken"]), "K", good)
    assert failed[seed.KEY] == "K" and failed[seed.TREE] == c["broken"].tree
    assert failed[seed.STALE] == ["include/util.h", "kernel/sys.c"]
    # a checkout of good from it: good and broken differ in both, and both are stale anyway
    assert seed._differing(_plan(c["good"], "/checkout/b"), failed) == ["include/util.h", "kernel/sys.c"]
    # a checkout of base: lib/string.c is the same in all three, so only those
    assert seed._differing(_plan(c["base"], "/checkout/b"), failed) == ["include/util.h", "kernel/sys.c"]

    # a failure after a build whose staleness is unknown seeds nobody, and nor does the next
    unknown = seed.recorded_failure(_plan(c["broken"]), "K", {seed.TREE: c["good"].tree})
    assert unknown == {seed.KEY: None, seed.STALE: None}
    assert seed.recorded_failure(_plan(c["kconfig"]), "K", {**good, **unknown})[seed.KEY] is None

    # a difference that is not C sources and headers is left to a whole build
    assert seed._differing(_plan(c["kconfig"], "/checkout/b"), {**good, "ok": True}) is None
