"""`flagbench watch` on a kernel tree's commits, with real git, Kbuild, qemu and the guest's exact
counts: the series case's repository (cases/series/make-repo, shared with tests/test_series.py:
Debian's 6.1 tree, then a comment reworded, strncpy grown, a commit that does not build and
getppid asking for the parent's pid twice), built in the suite's one kernel configuration (its
base commit is ccache hits after the shared kernel; after test_series.py's kernel series every
commit's build is found by its tree, nothing rebuilds), each commit booted once, the first one
twice (the A/A floor).

With --objects, the getppid commit and the one before it are built once more, each in a
checkout and O= directory of its own (bisect's object search relinks them; ccache serves the
compiles: about 3 minutes the first time here), kept in the cache: a warm run took 57 s.

The oracle is the repository's plan: the getppid commit is the one whose code on the bench's
path (10,000 getppid calls) changed; strncpy's growth is off that path, and its count's move
must be judged against the floor, not reported.
"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import flagbench
from test_series import CASE, kernel_repo, repo_state  # noqa: F401  (kernel_repo: the fixture)
from test_watch import findings, ledger

from watch_repo import git

METRIC = "getppid kernel_insns_per_iter"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="needs qemu-system-x86")
def test_kernel_watch_names_the_getppid_commit_with_its_cause_and_objects(kernel_repo, tmp_path):  # noqa: F811
    from flagbench.cli import demo_series

    exp = demo_series.experiment(CASE, kernel_repo)
    before = repo_state(kernel_repo)
    done = flagbench("watch", exp, "--branch", "series", "--since", "base", "--once", "--objects",
                     "--db", tmp_path / "w.db", "--out", tmp_path / "out", timeout=3600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert repo_state(kernel_repo) == before              # the user's repository is only read
    sha = {git(kernel_repo, "log", "-1", "--format=%s", ref).strip(): git(kernel_repo, "rev-parse", ref).strip()
           for ref in ("base", "series~3", "series~2", "series~1", "series")}
    base, comment, grown, broken, getppid = sha.values()
    assert "pass: 5 commits measured" in done.stderr

    # exactly one finding: the commit that changed the path, directly
    assert findings(done.stdout) == [(getppid[:12], "exact", "direct")], done.stdout + done.stderr[-3000:]

    rows = ledger(tmp_path / "w.db")
    floor = rows[base]["floor"][METRIC]
    assert floor is not None and floor >= 0                # the first commit booted twice
    assert all(rows[s]["floor"][METRIC] == floor for s in (comment, grown, getppid))   # the configuration's
    assert rows[broken]["status"] == "failed" and "kernel/sys.c" in rows[broken]["error"]
    for s in (comment, grown, getppid):                    # each booted: every symbol the bench ran
        assert rows[s]["profile"]["getppid"], s

    # strncpy grew, off the bench's path: its count's move is within the floor, its cause layout
    g = rows[grown]
    assert "strncpy" in g["changed"] and "strncpy" not in rows[base]["profile"]["getppid"]
    assert abs(g["counts"][METRIC] - g["base_counts"][METRIC]) <= floor
    assert g["causes"][METRIC].startswith("cause: layout"), g["causes"]
    assert g["timed_reason"] == "code identical on the measured path"
    assert rows[comment]["changed"] == [] and rows[comment]["timed_reason"] == "code identical on the measured path"

    # getppid's: compared with the last commit that built, the move carried by changed code on the path
    p = rows[getppid]
    assert p["compared_with"] == grown
    assert p["counts"][METRIC] - p["base_counts"][METRIC] > 10_000    # 10,000 calls, each asking twice now
    line = p["causes"][METRIC]
    assert line.startswith("cause: direct: ") and "getppid" in line, line

    # --objects: the move bisected to the object that defines getppid, named in the report
    (mbox,) = (tmp_path / "out" / "reports").glob(f"{getppid[:12]}-exact-*.mbox")
    text = mbox.read_text()
    assert f"commit: {getppid}" in text and f"parent: {grown}" in text
    assert "objects carrying it: kernel/sys.o " in text, text
    assert all(len(x) < 100 for x in text.splitlines() if not x.startswith(("  flagbench", "Subject")))

    # each object checkout's build (its own O=, started from the walked one's: kbuild/seed.py) is
    # the walked build of its commit, symbol for symbol (bloat-o-meter's rules: nothing moved)
    from flagbench.build import cache_dir
    trees = cache_dir() / "kernel" / "trees"
    kept = {json.loads(f.read_text())["commit"]["tree"]: f.parent for f in trees.glob("git-*/builds/*/flagbench-cell.json")}
    for sha in (grown, getppid):
        (odir,) = trees.glob(f"git-*/out/git/*--{sha[:12]}")
        record = json.loads((odir / "flagbench-cell.json").read_text())
        walked = kept[git(kernel_repo, "rev-parse", f"{sha}^{{tree}}").strip()]
        assert record["ok"], record
        bom = flagbench("size", "--format=bom", walked / "vmlinux", odir / "vmlinux")
        assert bom.returncode == 0 and "up/down: 0/0 (0)" in bom.stdout, (odir, walked, bom.stdout[-2000:])
        if record.get("seeded_from"):    # built in this run: only what the commits' difference touches
            assert record["compiled"] < 50, record

    # a restart measures nothing again (no boot, no relink)
    again = flagbench("watch", exp, "--branch", "series", "--once", "--objects", "--db", tmp_path / "w.db",
                      "--out", tmp_path / "out", timeout=600)
    assert again.returncode == 0 and "pass: 0 commits measured" in again.stderr, again.stderr
    assert again.stdout == ""


def _kernel_history(moves: list[tuple[list[str], dict[str, float]]], floor: float):
    """A branch of kernel commits, each compared with the one before: (changed functions, the
    symbols' moves) per commit, from a base profile of three symbols; FLOOR the base's A/A floor."""
    from flagbench.watch.changes import History
    from flagbench.watch.evidence import Evidence

    profile = {"__x64_sys_getppid": 70_000.0, "pid_nr_ns": 160_144.0, "timekeeping_advance": 2_310.0}
    rows = [(f"{0:040x}", "base", True, Evidence(f"{0:040x}", "", True, counts={METRIC: sum(profile.values())},
                                                 profile={"getppid": dict(profile)}, floor={METRIC: floor}))]
    for i, (changed, move) in enumerate(moves, 1):
        head = {s: v + move.get(s, 0.0) for s, v in profile.items()}
        ev = Evidence(f"{i:040x}", f"{i - 1:040x}", True, changed=changed, counts={METRIC: sum(head.values())},
                      base_counts={METRIC: sum(profile.values())}, profile={"getppid": head},
                      floor={METRIC: floor})
        rows.append((ev.sha, f"commit {i}", True, ev))
        profile = head
    return History("series", rows)


def test_a_kernel_commit_is_judged_by_its_profile_against_the_floor():
    """Counts shaped like the series case's (the oracle: which commit changed code the bench ran):
    a move off the path within the A/A floor is layout, no finding; beyond it, indirect, a
    finding; a changed function that ran, direct, whatever the floor."""
    from flagbench.watch import findings_of
    from flagbench.watch.loop import judge_all

    h = _kernel_history([(["strncpy", "memset_orig"], {"timekeeping_advance": 3_901.0}),   # off the path
                         ([], {"pid_nr_ns": 25_000.0}),                                    # data: indirect
                         (["__x64_sys_getppid"], {"__x64_sys_getppid": 60_000.0, "pid_nr_ns": 160_000.0})],
                        floor=10_561.0)
    found = {f.sha[-1]: f for f in findings_of([h], 0.1)}
    assert sorted(found) == ["2", "3"]
    assert found["2"].cause == "indirect" and "beyond the A/A floor 10,561" in found["2"].cause_line
    assert found["3"].cause == "direct"
    assert found["3"].cause_line.startswith("cause: direct: __x64_sys_getppid +60,000")
    off = h.rows[1][3]
    (v,) = judge_all(off, h.rows[0][3].profile, off.profile, 0.1)
    assert v.cause == "layout" and not v.moved and "within the A/A floor 10,561" in v.line
