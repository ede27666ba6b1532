"""A real kernel series from its mails: the series case's repository (cases/series/make-repo, the
suite's one kernel configuration: tests/kernel_util.py) and the mbox shipped beside it
(cases/series/series.mbx: `git format-patch --thread --cover-letter --base`, what `flagbench demo
--full` measures) as v1, and a v2 whose 4/4 changed. The commits `git am` makes in flagbench's
clone are walked in the repository's own checkout and O= directory (vcs.origin): one tree is one
build, and v2 rebuilds only what its changed patch touches.
"""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench
from test_series import CASE, kernel_repo, repo_state  # noqa: F401  (a session fixture used here)

TWICE = "+\tpid = task_tgid_vnr(rcu_dereference(current->real_parent));\n"
TWICE_V2 = "+\tpid = task_tgid_vnr(rcu_dereference(current->parent));\n"   # v2's 4/4: another first ask
SUBJECTS = ["lib/string: reword the comment above strncpy", "lib/string: strncpy pads at once when the source is empty",
            "sys: count getppid callers", "sys: getppid asks for the parent's pid twice"]


@pytest.fixture(scope="module")
def mboxes(tmp_path_factory) -> dict[str, Path]:
    """v1: the case's mbox as shipped; v2: the same mails as [PATCH v2 k/4], 4/4's added line
    changed (a diff range-diff calls changed, another tree), its Message-IDs new."""
    out = tmp_path_factory.mktemp("kmail")
    v1 = (CASE / "series.mbx").read_text()
    assert v1.count(TWICE) == 1
    v2 = re.sub(r"(?m)^Subject: \[PATCH ", "Subject: [PATCH v2 ", v1).replace(TWICE, TWICE_V2)
    v2 = re.sub(r"<([^<>\s]+\.git\.[^<>\s]+)>", r"<v2-\1>", v2)      # Message-Id, In-Reply-To, References
    (out / "v2.mbx").write_text(v2)
    return {"v1": CASE / "series.mbx", "v2": out / "v2.mbx"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}).stdout


def series_json(exp: Path, *args, db: Path) -> dict:
    done = flagbench("series", exp, *args, "--no-counts", "-j2", "--format", "json", "--db", db, timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_a_kernel_series_from_mail_builds_in_the_repositorys_tree_and_v2_rebuilds_its_change(
        kernel_repo, mboxes, tmp_path):
    from flagbench.cache import cache_dir
    from flagbench.cli import demo_series
    from flagbench.kbuild import source

    exp = demo_series.experiment(CASE, kernel_repo)
    db = tmp_path / "fb.db"
    before = repo_state(kernel_repo)
    v1 = series_json(exp, "--mbox", mboxes["v1"], db=db)
    assert repo_state(kernel_repo) == before
    rows = v1["rows"]
    assert [r["subject"] for r in rows[1:]] == SUBJECTS
    # the shipped mails are make-repo's commits: git am makes their trees (the demo relies on it)
    assert [r["tree"] for r in rows] == [git(kernel_repo, "rev-parse", f"{ref}^{{tree}}").strip()
                                         for ref in ("base", "series~3", "series~2", "series~1", "series")]
    assert rows[1]["vs_parent"]["total"] == 0 and rows[2]["vs_parent"]["total"] > 0
    assert "strncpy" in rows[2]["vs_parent"]["functions"]
    assert not rows[3]["built"] and "kernel/sys.c" in rows[3]["error"]
    assert rows[4]["compared_with"] == rows[2]["short"] and rows[4]["vs_parent"]["functions"]
    # the clone's work tree: the two files the patches touch, not the kernel's 75,000
    clone = Path(v1["mail"]["clone"])
    files = sorted(str(f.relative_to(clone)) for f in clone.rglob("*") if f.is_file() and ".git" not in f.parts)
    assert files == ["kernel/sys.c", "lib/string.c"]
    # the clone's commits are built in the repository's walked checkout and O= directory
    assert source.vcs.origin(clone) == kernel_repo
    tip = source.vcs.resolve(kernel_repo, "series")
    odirs = [o for home in (cache_dir() / "kernel" / "trees").glob("git-*") for o in home.glob("out/git/*")
             if o.is_dir() and source.git_tree(tip, o.name).home == home]   # not its .lock and .owner
    odir = min(odirs, key=lambda o: len(o.name))   # the cell's own, not an object bisection's (NAME--SHA)
    src = odir.parent.parent.parent / "src"
    at_tip = source.vcs.holds(src) == rows[4]["tree"]    # (unless another test walked it since)
    objects = {name: (odir / name).stat().st_mtime_ns for name in ("lib/string.o", "kernel/sys.o", "fs/open.o")}

    v2 = series_json(exp, "--mbox", mboxes["v2"], db=db)
    rows2 = v2["rows"]
    for old, new in zip(rows[1:4], rows2[1:4]):                             # 1-3/4: v1's trees, not built again
        assert new["tree"] == old["tree"] and new["built"] == old["built"]
    assert rows2[1]["cached"] and rows2[2]["cached"]
    assert rows2[4]["tree"] != rows[4]["tree"] and rows2[4]["built"]
    # v2's 4/4 was built in the repository's O= directory (now, or by an earlier run of this test:
    # kept by its tree, with make's log), compiling kernel/sys.c
    (kept,) = [c.parent for c in (odir.parent.parent.parent / "builds").glob("*/flagbench-cell.json")
               if json.loads(c.read_text())["commit"]["tree"] == rows2[4]["tree"]]
    compiled = set(re.findall(r"(?m)^\s+CC\s+(\S+)$", (kept / "flagbench-make.log").read_text()))
    assert "kernel/sys.o" in compiled
    if not rows2[4]["cached"]:
        assert source.vcs.holds(src) == rows2[4]["tree"]                     # walked there just now
        after = {name: (odir / name).stat().st_mtime_ns for name in objects}
        assert after["kernel/sys.o"] > objects["kernel/sys.o"]
        if at_tip:  # from v1's 4/4 to v2's only kernel/sys.c changed: nothing else compiled again
            sources = {o for o in compiled if not o.startswith(("init/version", "arch/x86/boot/"))}
            assert sources == {"kernel/sys.o"}, compiled       # (the rest: the version stamp, bzImage)
            assert after["lib/string.o"] == objects["lib/string.o"] and after["fs/open.o"] == objects["fs/open.o"]
    # both versions again, from the store: range-diff pairs 1-3/4 as the same diff, 4/4 as changed
    done = flagbench("series", exp, "--mbox", mboxes["v1"], "--mbox", mboxes["v2"], "--no-counts", "--db", db,
                     timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    said = re.findall(r"range-diff: (.) ", done.stdout)
    assert said == ["=", "=", "=", "!"], done.stdout
    assert all(len(line) <= 100 for line in done.stdout.splitlines())      # the cover's long subject cut
    assert repo_state(kernel_repo) == before



@pytest.mark.slow
def test_demo_full_takes_the_series_case_from_its_mails(kernel_repo, tmp_path):
    """`flagbench demo --full`'s series section: the case's mbox through the --mbox road (after
    the test above its builds are kept by tree: the patches boot and count, the broken one fails
    again), a row per patch, pasteable as it stands."""
    from flagbench.cli import demo_series
    from flagbench.report.doc import Code

    before = repo_state(kernel_repo)
    section, summary, status = demo_series.blocks(CASE, lambda s: None, tmp_path / "fb.db")
    assert status == 0 and repo_state(kernel_repo) == before
    (code,) = [b for b in section if isinstance(b, Code)]
    text = "\n".join(code.lines)
    assert section[0].text.endswith("from its mails (cases/series/series.mbx)")
    assert "/series.mbx) on " in text and "base: base-commit: in the mails" in text
    shas = [git(kernel_repo, "rev-parse", "--short=12", ref).strip() for ref in ("series~3", "series~1")]
    rows = {line.split()[0]: line for line in code.lines if re.match(r"^[0-9a-f]{12}  ", line)}
    # git am's commits (committed by flagbench@localhost), not make-repo's: the mails were applied
    assert len(rows) == 5 and all(s not in rows for s in shas)
    assert sum("does not build: kernel/sys.c" in line for line in rows.values()) == 1
    assert "patches by flagbench <flagbench@example.org>: 1, 2, 3, 4" in text
    assert all(len(line) <= 100 for line in code.lines)
