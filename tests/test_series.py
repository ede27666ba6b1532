"""Commits as variants and `flagbench series`, on git repositories the tests make: a small C
one (fast), and Debian's 6.1 kernel tree with the commits of cases/series/make-repo (slow).

The oracle for sizes is the kernel's scripts/bloat-o-meter (test_size.oracle) run on the very
files each row was built into; counts are checked by their sign and by which commit moves them.
The user's repository must come out as it went in: status, index bytes, stash, branches, HEAD.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment
from test_size import oracle

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}

LOOP_C = """\
#include <stdint.h>
/* sum: a loop */
uint64_t sum_loop(uint64_t n)
{
\tvolatile uint64_t acc = 0;
\tfor (uint64_t i = 0; i < n; i++) {
\t\tacc += i;
\t}
\treturn acc;
}

int helper(int x)
{
\treturn x * 3 + 1;
}
"""
EXPERIMENT = """\
sources = ["loop.c"]
[variants]
default = {}
[[bench]]
name = "sum"
kind = "micro"
function = "sum_loop"
metrics = ["insns"]
"""
# (subject, old text, new text) on loop.c; None: an empty commit (the same tree as its parent)
C_COMMITS = [
    ("loop: reword a comment", "/* sum: a loop */", "/* sum_loop: adds 0..n-1 */"),
    ("empty: the same tree", None, None),
    ("helper: a second case", "\treturn x * 3 + 1;", "\tif (x > 100)\n\t\treturn x / 7 + x % 5;\n\treturn x * 3 + 1;"),
    ("loop: broken", "\t\tacc += i;\n", "\t\tacc += i\n"),
    ("loop: xor each step", "\t\tacc += i\n", "\t\tacc += i;\n\t\tacc ^= i;\n"),
]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}).stdout


def repo_state(repo: Path) -> tuple:
    """Everything flagbench must leave alone in the user's repository, read without writing it:
    the work tree against HEAD and the index (compared by content: `git status` refreshes a copy
    of the index, not the repository's; a stat-dirty entry is not a change), and the index file
    itself byte for byte."""
    import shutil
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        shutil.copyfile(repo / ".git" / "index", index)
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=all"],
                                capture_output=True, text=True, check=True,
                                env={**os.environ, "GIT_INDEX_FILE": str(index)}).stdout
    return (status,
            (repo / ".git" / "index").read_bytes(),
            git(repo, "stash", "list"), git(repo, "for-each-ref"), git(repo, "rev-parse", "HEAD"),
            git(repo, "worktree", "list", "--porcelain"), sorted(os.listdir(repo / ".git")))


@pytest.fixture(scope="module")
def c_repo(tmp_path_factory) -> Path:
    """A C repository: base (tag), then C_COMMITS on branch main; the experiment in exp/, with an
    uncommitted change in the work tree and a stash, which must survive."""
    repo = tmp_path_factory.mktemp("c-series") / "repo"
    write_experiment(repo / "exp", EXPERIMENT, {"loop.c": LOOP_C})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    source = repo / "exp" / "loop.c"
    for subject, old, new in C_COMMITS:
        if old is None:
            git(repo, "commit", "-q", "--allow-empty", "-m", subject)
            continue
        text = source.read_text()
        assert old in text, subject
        source.write_text(text.replace(old, new, 1))
        git(repo, "commit", "-q", "-a", "-m", subject)
    (repo / "exp" / "notes.txt").write_text("untracked\n")
    source.write_text(source.read_text() + "/* stashed */\n")
    git(repo, "stash", "-q")
    source.write_text(source.read_text() + "/* uncommitted */\n")
    return repo


@pytest.fixture(scope="module")
def c_series(c_repo, tmp_path_factory):
    cache = tmp_path_factory.getbasetemp() / "series-cache"
    db = tmp_path_factory.mktemp("series-db") / "fb.db"
    before = repo_state(c_repo)
    done = flagbench("series", c_repo / "exp", "base..main", "--format", "json", "--db", db, cache=cache,
                     timeout=600)
    assert done.returncode == 0, done.stderr
    assert repo_state(c_repo) == before
    again = flagbench("series", c_repo / "exp", "base..main", "--fresh", "--db", db, cache=cache, timeout=600)
    assert again.returncode == 0, again.stderr
    return json.loads(done.stdout), again.stdout, cache, db


def test_c_series_rows_name_the_commits_and_match_bloat_o_meter(c_series, c_repo, tmp_path):
    data, text, _, _ = c_series
    rows = data["rows"]
    subjects = ["base", *(s for s, _, _ in C_COMMITS)]
    assert [r["subject"] for r in rows] == subjects
    assert [r["sha"] for r in rows] == [git(c_repo, "rev-parse", "base").strip(),
                                       *git(c_repo, "rev-list", "--reverse", "base..main").split()]
    by = {r["subject"]: r for r in rows}
    for r in rows:
        if r["built"] and r["vs_parent"]:
            older = next(o for o in rows if o["short"] == r["compared_with"])
            bom = oracle(tmp_path, older["size_file"], r["size_file"], current=True)
            total = int(re.search(r"up/down: \S+ \(([-+]?\d+)\)", bom).group(1))
            assert r["vs_parent"]["total"] == total, (r["subject"], bom)
    comment, empty, grown = by["loop: reword a comment"], by["empty: the same tree"], by["helper: a second case"]
    assert comment["vs_parent"]["total"] == 0 and comment["vs_parent"]["changed"] == 0
    assert empty["tree"] == comment["tree"]                          # one tree: one object, compiled once
    assert os.stat(empty["files"][0]).st_ino == os.stat(comment["files"][0]).st_ino
    assert grown["vs_parent"]["total"] > 0 and grown["vs_parent"]["grow"] == 1
    assert grown["vs_parent"]["functions"] == ["helper"]
    assert grown["vs_parent"]["counts"] == {"sum insns_per_iter": 0.0}
    broken, loop = by["loop: broken"], by["loop: xor each step"]
    assert not broken["built"] and "expected ';'" in broken["error"] and "exp/loop.c:" in broken["error"]
    assert loop["compared_with"] == grown["short"]    # its first parent did not build: the nearest that did
    assert loop["vs_parent"]["functions"] == ["sum_loop"] and loop["vs_parent"]["total"] > 0
    assert loop["vs_parent"]["counts"]["sum insns_per_iter"] > 0    # the loop runs more instructions
    assert loop["vs_base"]["total"] == grown["vs_parent"]["total"] + loop["vs_parent"]["total"]
    lines = text.splitlines()
    assert all(len(line) <= 100 for line in lines), text
    assert any(line.startswith(broken["short"]) and "does not build" in line for line in lines)
    assert f"; {len(rows) - 1} from the cache" in text               # the second run built nothing


def test_c_series_markdown_has_a_row_per_commit(c_series, c_repo):
    _, _, cache, db = c_series
    done = flagbench("series", c_repo / "exp", "base..main", "--format", "md", "--no-counts", "--db", db,
                     cache=cache)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "```" and lines[-1] == "```"            # the text table as code: it fits a mail
    assert all(len(line) <= 100 for line in lines)
    rows = [line for line in lines if re.match(r"[0-9a-f]{12}  ", line)]
    assert len(rows) == 1 + len(C_COMMITS)
    assert any("helper: a second case" in r for r in rows)
    # under a commit: bloat-o-meter's lines for the functions it grew (helper is the one that did)
    assert any(re.fullmatch(r" {14}size: helper \+\d+.*", line) for line in lines), done.stdout
    done = flagbench("series", c_repo / "exp", "base..main", "--format", "html", "--db", db, cache=cache)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("<svg") == 2 and "helper: a second case" in done.stdout   # size and sum counts


def test_a_series_is_a_stored_run_that_report_prints_again_without_building(c_series, c_repo, tmp_path):
    """`report --list` names the series run; `report RUN` reprints its table byte for byte from the
    store alone (its cache empty: nothing can be built); the series run again resumes and measures
    nothing (its samples stay as they were)."""
    import sqlite3

    _, text, cache, db = c_series
    listed = flagbench("report", "--list", "--db", db)
    assert listed.returncode == 0, listed.stderr
    run_id = re.search(r"^run (\d+);", text, re.M).group(1)
    line = next(ln for ln in listed.stdout.splitlines() if ln.split()[0] == run_id)
    assert " series " in line and line.endswith(", base..main")
    again = flagbench("report", run_id, "--db", db, cache=tmp_path / "empty-cache")
    assert again.returncode == 0, again.stderr
    assert again.stdout == text
    assert not (tmp_path / "empty-cache").exists() or not any((tmp_path / "empty-cache").rglob("*.o"))
    with sqlite3.connect(db) as con:
        samples = con.execute("SELECT count(*) FROM samples WHERE run_id = ?", (run_id,)).fetchone()[0]
    resumed = flagbench("series", c_repo / "exp", "base..main", "--db", db, cache=cache)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == text and "every commit is stored" in resumed.stderr
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM samples WHERE run_id = ?", (run_id,)).fetchone()[0] == samples
        provs = [json.loads(p) for (p,) in con.execute("SELECT provenance FROM samples WHERE run_id = ?", (run_id,))]
    shas = {git(c_repo, "rev-parse", "base").strip(), *git(c_repo, "rev-list", "base..main").split()}
    assert provs and all(p["commit"]["sha"] in shas and len(p["commit"]["tree"]) == 40 for p in provs)


def test_ref_variants_read_the_sources_at_their_commit(c_repo, c_series, tmp_path):
    """Variants naming commits: `size` compares those commits' objects, refs with one tree share
    their objects, and the user's checkout is not touched."""
    _, _, cache, _ = c_series
    exp = c_repo / "exp" / "refs.toml"
    exp.write_text('sources = ["loop.c"]\n[variants]\nold = { ref = "base" }\nnew = { ref = "main~2" }\n'
                   'empty = { ref = "main~3" }\ncomment = { ref = "main~4" }\n')
    try:
        before = repo_state(c_repo)
        done = flagbench("size", exp, "--variants", "old,new", "--format", "json", cache=cache)
        assert done.returncode == 0, done.stderr
        grown = {s["name"]: s["delta"] for s in json.loads(done.stdout)["symbols"]}
        assert set(grown) == {"helper"} and grown["helper"] > 0
        done = flagbench("build", exp, "--format", "json", cache=cache)
        assert done.returncode == 0, done.stderr
        objects = {c["variant"]: c["objects"][0] for c in json.loads(done.stdout)["cells"]}
        assert os.stat(objects["old"]).st_ino != os.stat(objects["new"]).st_ino
        assert os.stat(objects["empty"]).st_ino == os.stat(objects["comment"]).st_ino   # one tree
        assert repo_state(c_repo)[1:] == before[1:]
    finally:
        exp.unlink()


def test_an_unknown_ref_is_its_line_and_exit_2(c_repo, tmp_path):
    exp = c_repo / "exp" / "bad.toml"
    exp.write_text('sources = ["loop.c"]\n[variants]\nold = {}\n\nnew = { ref = "no-such-branch" }\n')
    try:
        done = flagbench("size", exp, cache=tmp_path / "cache")
    finally:
        exp.unlink()
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"flagbench size: {exp}:5: variant 'new': ref 'no-such-branch' names no commit in {c_repo}"]
    done = flagbench("series", c_repo / "exp", "base..no-such", "--db", tmp_path / "fb.db", cache=tmp_path / "cache")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no-such" in done.stderr and "Traceback" not in done.stderr


# -- a kernel series: Debian's 6.1 tree as a git repository ---------------------------------------
CASE = Path(__file__).resolve().parent.parent / "cases" / "series"


@pytest.fixture(scope="session")
def kernel_repo() -> Path:
    """cases/series/make-repo's repository, made once in the cache (hard-linked from the
    unpacked Debian tree; a minute or two) where `flagbench demo --full` makes it too."""
    from kernel_util import missing_tools

    from flagbench.cli import demo_series

    missing = missing_tools()
    if missing:
        pytest.skip(f"kernel build needs {', '.join(missing)} (scripts/install-deps)")
    return demo_series.repo(CASE)


@pytest.mark.slow
def test_kernel_series_names_the_commits_with_bloat_o_meter_deltas_and_counts(kernel_repo, tmp_path):
    from flagbench.cli import demo_series

    exp = demo_series.experiment(CASE, kernel_repo)    # the case's series.toml, its source the repository
    before = repo_state(kernel_repo)
    done = flagbench("series", exp, "base..series", "--format", "json", "-j2", "--db", tmp_path / "fb.db",
                     timeout=3600)
    assert done.returncode == 0, done.stderr
    assert repo_state(kernel_repo) == before
    rows = json.loads(done.stdout)["rows"]
    assert [r["subject"] for r in rows] == [
        "Linux 6.1.192 (Debian linux-source-6.1)", "lib/string: reword the comment above strncpy",
        "lib/string: strncpy pads at once when the source is empty", "sys: count getppid callers",
        "sys: getppid asks for the parent's pid twice"]
    base, comment, grown, broken, getppid = rows
    for r in (comment, grown, getppid):
        older = next(o for o in rows if o["short"] == r["compared_with"])
        bom = oracle(tmp_path, older["size_file"], r["size_file"], current=True)
        assert r["vs_parent"]["total"] == int(re.search(r"up/down: \S+ \(([-+]?\d+)\)", bom).group(1)), bom
        bom = oracle(tmp_path, base["size_file"], r["size_file"], current=True)
        assert r["vs_base"]["total"] == int(re.search(r"up/down: \S+ \(([-+]?\d+)\)", bom).group(1)), bom
    assert comment["vs_parent"]["total"] == 0 and comment["vs_parent"]["changed"] == 0
    assert grown["vs_parent"]["total"] > 0 and "strncpy" in grown["vs_parent"]["functions"]
    assert not broken["built"] and "kernel/sys.c" in broken["error"]
    assert getppid["compared_with"] == grown["short"]
    assert any("getppid" in f for f in getppid["vs_parent"]["functions"])
    metric = "getppid kernel_insns_per_iter"
    moved = getppid["vs_parent"]["counts"][metric]
    assert moved > 10_000                        # 10,000 calls, each asking twice now
    for r in (comment, grown):                   # the others move the count by noise at most
        assert abs(r["vs_parent"]["counts"][metric]) < moved / 20, r
    # the guest's per-symbol counts and the base booted twice: each move attributed (attribution.py)
    assert getppid["causes"][metric].startswith("direct: ") and "getppid" in getppid["causes"][metric], getppid
    if grown["vs_parent"]["counts"][metric]:     # strncpy changed, and does not run under getppid
        assert grown["causes"][metric].startswith("layout: ") and "within the A/A floor" in grown["causes"][metric]


@pytest.mark.slow
def test_kernel_bisection_on_counts_names_the_getppid_commit_beside_the_broken_one(kernel_repo, tmp_path):
    """Bisect base..series on the guest bench's kernel instructions: grown strncpy stays under the
    threshold, the commit that does not build is skipped, and since it sits right before the
    getppid commit the answer is the two of them, as `git bisect` would say. By default the
    threshold is on the attributed change (bisect/attributed.py: the guest's per-symbol counts,
    the changed functions of the two vmlinux files, the base booted twice for the A/A floor), and
    the getppid step's cause names __x64_sys_getppid; --on total bisects the total to the same
    answer. (After the series test of this module its builds are kept by tree: the steps boot
    and count, nothing rebuilds.)"""
    from flagbench.cli import demo_series

    exp = demo_series.experiment(CASE, kernel_repo)
    before = repo_state(kernel_repo)
    broken, getppid = (git(kernel_repo, "rev-parse", "--short=12", ref).strip() for ref in ("series~1", "series"))
    for on in ((), ("--on", "total")):
        done = flagbench("bisect", exp, "--good", "base", "--bad", "series", "--metric", "insns",
                         "--threshold", "+5%", *on, "--db", tmp_path / f"fb{len(on)}.db", timeout=3600)
        assert done.returncode == 1, done.stderr[-3000:]     # 1: no single first bad commit
        assert repo_state(kernel_repo) == before
        said = done.stdout + done.stderr
        assert f"first bad commit is one of: {broken}, {getppid}" in said, said[-3000:]
        assert f"{broken}" in done.stderr and "does not build" in done.stderr, done.stderr[-3000:]
        if on:
            assert "attributed" not in said, said[-3000:]
            continue
        assert "the threshold applies to the total" not in said, said[-3000:]
        assert "A/A floor" in said and "booted twice" in said, said[-3000:]
        lines = said.splitlines()
        step = next(i for i, line in enumerate(lines) if re.search(rf"step \d+: {getppid} ", line))
        assert ": attributed +" in lines[step] and lines[step].endswith(": bad"), lines[step]
        cause = lines[step + 1]
        assert re.search(r":   cause: direct: .*__x64_sys_getppid", cause), said[-3000:]
        assert "threshold on the attributed change" in said, said[-3000:]


def test_walk_rewrites_only_what_a_commit_changed(c_repo, tmp_path):
    """vcs.walk moves a checkout flagbench owns from commit to commit: an unchanged file keeps
    its inode and mtime (make rebuilds nothing for it), a changed one is rewritten, a deleted one
    goes; the user's repository is not written."""
    from flagbench import vcs, vcs_export

    before = repo_state(c_repo)
    base, grown = vcs.resolve(c_repo, "base"), vcs.resolve(c_repo, "main~2")
    dest = tmp_path / "walk" / "src"
    assert vcs.walk(base, dest) == [] and vcs.holds(dest) == base.tree
    toml, loop = dest / "exp" / "experiment.toml", dest / "exp" / "loop.c"
    kept, changed = os.stat(toml), os.stat(loop)
    os.utime(loop, ns=(changed.st_atime_ns, changed.st_mtime_ns - 10**9))   # older: a rewrite shows
    assert vcs.walk(grown, dest) == ["exp/loop.c"]
    assert os.stat(toml).st_ino == kept.st_ino and os.stat(toml).st_mtime_ns == kept.st_mtime_ns
    assert os.stat(loop).st_mtime_ns > changed.st_mtime_ns - 10**9 and "x / 7" in loop.read_text()
    assert vcs.walk(grown, dest) == []
    exported = vcs_export.export(grown, tmp_path / "export")
    assert (exported / "exp" / "loop.c").read_bytes() == loop.read_bytes()
    assert repo_state(c_repo) == before
    with pytest.raises(vcs.UnknownRef):
        vcs.resolve(c_repo, "--upload-pack=x")


def test_a_series_killed_midway_resumes_from_what_was_stored(c_repo, c_series, tmp_path):
    """kill -9 once the fourth commit is being built; the same command again builds and measures
    only what is missing: every commit's build is recorded once, every cell measured once, and
    the rows are the clean run's."""
    import signal
    import sqlite3
    import sys
    import time

    clean, _, cache, _ = c_series
    db = tmp_path / "fb.db"
    argv = [sys.executable, "-m", "flagbench", "series", str(c_repo / "exp"), "base..main", "--format", "json",
            "--db", str(db)]
    env = {**os.environ, "FLAGBENCH_CACHE": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")}
    log = tmp_path / "first.err"
    with open(log, "w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while "[4/6]" not in log.read_text() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert proc.poll() is None, log.read_text()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    with sqlite3.connect(db) as con:
        per_cell = con.execute("SELECT bench, cell, metric, count(*) FROM samples GROUP BY bench, cell, metric").fetchall()
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 1
    assert per_cell and all(n == 1 for *_, n in per_cell), per_cell
    assert {b for b, *_ in per_cell} >= {"build", "size", "asm", "sum"}

    def rows(data):
        return [{k: r[k] for k in ("sha", "built", "compared_with", "counts", "vs_parent", "vs_base")}
                for r in data["rows"]]
    assert rows(json.loads(again.stdout)) == rows(clean)
