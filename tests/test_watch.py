"""`flagbench watch` on a C history the test makes (tests/watch_repo.py: dozens of commits, most
unrelated, some changing the measured loop, some only moving it, one that does not build), with
real git, gcc, valgrind and the engine's timing. The oracle is the history's plan: the findings
must name exactly the commits that changed the loop.
"""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT, flagbench
from test_series import repo_state

import watch_repo
from watch_repo import git

N = 30


def watch(cwd: Path, *args, cache: Path, timeout: float = 900):
    return flagbench("watch", *args, cwd=cwd, cache=cache, timeout=timeout)


def findings(stdout: str) -> list[tuple[str, str, str]]:
    """(short sha, kind, cause) of each finding line on stdout."""
    out = []
    for line in stdout.splitlines():
        head, _, rest = line.partition(": ")
        sha = rest.split()[0]
        kind, cause = rest.split("(", 1)[1].split(")", 1)[0].split(", ")
        out.append((sha, kind, cause))
    return out


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    root = tmp_path_factory.mktemp("watch")
    repo, kinds = watch_repo.make(root, N)
    before = repo_state(repo)
    done = watch(root, repo / "exp", "--branch", "main", "--since", "base", "--once", "--samples", "3",
                 "--db", root / "w.db", "--out", root / "out", cache=root / "cache")
    assert done.returncode == 0, done.stderr
    assert repo_state(repo) == before   # the user's repository is only read
    return root, repo, kinds, done


def ledger(db: Path) -> dict[str, dict]:
    with sqlite3.connect(db) as c:
        return {sha: {"status": status, **json.loads(ev)}
                for sha, status, ev in c.execute("SELECT sha, status, evidence FROM watch_commits")}


def test_findings_name_exactly_the_commits_that_changed_the_loop(history):
    root, repo, kinds, done = history
    loops = {sha[:12] for sha, k in kinds.items() if k == "loop"}
    found = findings(done.stdout)
    assert {sha for sha, kind, _ in found if kind == "exact"} == loops
    assert {sha for sha, _, _ in found} <= loops          # a timed change point too, if any, is one of them
    assert all(cause == "direct" for _, _, cause in found)
    assert f"pass: {N + 1} commits measured" in done.stderr


def test_every_commit_is_a_row_timed_only_where_the_path_moved(history):
    root, repo, kinds, _ = history
    rows = ledger(root / "w.db")
    assert set(rows) == {*kinds, git(repo, "rev-parse", "base").strip()}
    (broken,) = [sha for sha, k in kinds.items() if k == "broken"]
    assert rows[broken]["status"] == "failed" and "error" in rows[broken]["error"]
    timed = {sha for sha, r in rows.items() if r["timed"]}
    assert timed == {sha for sha, k in kinds.items() if k == "loop"}
    for sha, k in kinds.items():
        if k in ("unrelated", "layout"):
            assert rows[sha]["timed_reason"] == "code identical on the measured path", (k, rows[sha])
            assert rows[sha]["counts"] == rows[sha]["base_counts"]
        if k == "layout":   # the loop moved, its code did not: sum_loop is not among the changed
            assert rows[sha]["changed"] and "sum_loop" not in rows[sha]["changed"]
    mended = next(sha for sha, k in kinds.items() if k == "mend")
    assert rows[mended]["compared_with"] != broken        # compared with the last commit that built


def test_reports_in_the_robots_form(history):
    root, repo, kinds, done = history
    loop = next(sha for sha, k in kinds.items() if k == "loop")
    (mbox,) = (root / "out" / "reports").glob(f"{loop[:12]}-exact-*.mbox")
    text = mbox.read_text()
    assert text.startswith("From ") and "\nSubject: [flagbench watch] sum insns_per_iter +" in text
    assert f"commit: {loop}" in text and f"parent: {git(repo, 'rev-parse', loop + '^').strip()}" in text
    assert "cause: direct: sum_loop +" in text and "within the A/A floor 0" in text
    assert f"flagbench series {repo / 'exp' / 'experiment.toml'} " in text
    assert all(len(line) < 100 for line in text.splitlines() if not line.startswith(("  flagbench", "Subject")))
    assert mbox.with_suffix(".md").read_text().startswith(r"### \[flagbench watch\] sum insns\_per\_iter +")


def test_a_restart_measures_nothing_again(history):
    root, repo, kinds, _ = history
    with sqlite3.connect(root / "w.db") as c:
        samples = c.execute("SELECT count(*) FROM samples").fetchone()[0]
    again = watch(root, repo / "exp", "--branch", "main", "--once", "--db", root / "w.db", "--out", root / "out",
                  cache=root / "cache")
    assert again.returncode == 0, again.stderr
    assert "pass: 0 commits measured" in again.stderr
    assert again.stdout == ""                             # no finding is new
    with sqlite3.connect(root / "w.db") as c:
        assert c.execute("SELECT count(*) FROM samples").fetchone()[0] == samples


def test_second_watcher_refused_sigterm_between_steps_and_resume(history, tmp_path):
    root, repo, kinds, _ = history
    args = [repo / "exp", "--branch", "main", "--since", "HEAD~12", "--no-time", "--db", tmp_path / "w.db",
            "--out", tmp_path / "out"]
    env_cache = {"FLAGBENCH_CACHE": str(root / "cache"), "PYTHONPATH": str(ROOT / "src")}
    log = tmp_path / "first.err"
    import os
    with open(log, "w") as err:
        first = subprocess.Popen([sys.executable, "-m", "flagbench", "watch", *map(str, args), "--interval", "1h"],
                                 cwd=tmp_path, stderr=err, stdout=subprocess.DEVNULL, env={**os.environ, **env_cache})
    try:
        deadline = time.monotonic() + 300
        while "[4/" not in log.read_text():
            assert first.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        second = watch(tmp_path, *args, "--once", cache=root / "cache")
        assert second.returncode == 2
        assert f"is watched already: pid {first.pid} " in second.stderr and len(second.stderr.splitlines()) == 1
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=120) == 0
    finally:
        if first.poll() is None:
            first.kill()
    said = log.read_text()
    assert "stopped by a signal between two commits" in said and "Traceback" not in said
    measured = len(ledger(tmp_path / "w.db"))
    assert 4 <= measured < 13
    rest = watch(tmp_path, *args, "--once", cache=root / "cache")
    assert rest.returncode == 0, rest.stderr
    assert f"pass: {13 - measured} commits measured" in rest.stderr
    assert len(ledger(tmp_path / "w.db")) == 13


def test_max_commits_bounds_a_pass_and_says_the_backlog(history, tmp_path):
    root, repo, _, _ = history
    args = [repo / "exp", "--branch", "main", "--since", "HEAD~4", "--no-time", "--once", "--max-commits", "3",
            "--db", tmp_path / "w.db", "--out", tmp_path / "out"]
    first = watch(tmp_path, *args, cache=root / "cache")
    assert first.returncode == 0, first.stderr
    assert "pass: 3 commits measured" in first.stderr and "backlog 2 commits" in first.stderr
    second = watch(tmp_path, *args, cache=root / "cache")
    assert "pass: 2 commits measured" in second.stderr and "backlog" not in second.stderr


def test_a_force_pushed_branch_is_followed(history, tmp_path):
    root, repo, kinds, _ = history
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), str(clone))
    git(clone, "branch", "-q", "topic", "main~4")
    args = [clone / "exp", "--branch", "topic", "--no-time", "--once", "--db", tmp_path / "w.db",
            "--out", tmp_path / "out"]
    first = watch(tmp_path, *args, "--since", "main~8", cache=root / "cache")
    assert first.returncode == 0, first.stderr
    old = git(clone, "rev-list", "main~8..main~4").split()
    git(clone, "checkout", "-q", "-B", "topic", "main~6")      # the rewrite: a clone the test owns
    loop = clone / "exp" / "loop.c"
    loop.write_text(loop.read_text().replace("\t\t/* STEP */\n", "\t\tacc *= 3;\n\t\t/* STEP */\n"))
    git(clone, "commit", "-q", "-a", "-m", "loop: rewritten step")
    new = git(clone, "rev-parse", "HEAD").strip()
    again = watch(tmp_path, *args, cache=root / "cache")
    assert again.returncode == 0, again.stderr
    assert "topic was rewritten" in again.stderr
    gone = set(git(clone, "rev-list", "main~6..main~4").split())
    assert f"{len(gone)} commits no longer on topic, kept" in again.stderr
    assert "pass: 1 commits measured" in again.stderr       # only the new commit
    assert [f[0] for f in findings(again.stdout)] == [new[:12]]
    with sqlite3.connect(tmp_path / "w.db") as c:
        members = dict(c.execute("SELECT sha, on_branch FROM watch_members WHERE branch='topic'"))
    assert {s for s, on in members.items() if not on} == gone and set(old) <= set(members)
    page = (tmp_path / "out" / "index.html").read_text()
    assert page.count("no longer on topic") == len(gone)


def test_a_stride_skips_commits_and_bisects_the_changes_among_them(history, tmp_path):
    root, repo, kinds, _ = history
    done = watch(tmp_path, repo / "exp", "--branch", "main", "--since", "HEAD~16", "--once", "--stride", "5",
                 "--no-time", "--db", tmp_path / "w.db", "--out", tmp_path / "out", cache=root / "cache")
    assert done.returncode == 0, done.stderr
    watched = git(repo, "rev-list", "HEAD~16..HEAD").split()
    loops = {sha[:12] for sha in watched if kinds[sha] == "loop"}
    assert len(loops) == 2 and {sha for sha, kind, _ in findings(done.stdout)} == loops
    assert "bisect: " in done.stderr and "skipped by --stride" in done.stderr
    rows = ledger(tmp_path / "w.db")
    assert sum(r["status"] == "skipped" for r in rows.values()) >= 5   # not everything was measured
    for sha in watched:   # a loop commit was compared with its own parent once bisected
        if kinds[sha] == "loop":
            assert rows[sha]["compared_with"] == git(repo, "rev-parse", sha + "^").strip()


def test_timed_on_a_host_only_where_the_path_moved(history, tmp_path):
    from sshd_util import sshd_server

    root, repo, kinds, _ = history
    watched = git(repo, "rev-list", "HEAD~5..HEAD").split()
    with sshd_server(tmp_path / "box", alias="box") as box:
        done = flagbench("watch", repo / "exp", "--branch", "main", "--since", "HEAD~5", "--once", "--samples", "3",
                         "--host", "box", "--db", tmp_path / "w.db", "--out", tmp_path / "out", cwd=tmp_path,
                         cache=root / "cache", env={"FLAGBENCH_SSH": box.ssh_env}, timeout=900)
    assert done.returncode == 0, done.stderr
    rows = ledger(tmp_path / "w.db")
    timed = {sha for sha, r in rows.items() if r["timed"]}
    assert timed == {sha for sha in watched if kinds[sha] == "loop"} and len(timed) == 1
    (entry,) = rows[timed.pop()]["timed"].items()
    assert entry[0] == "sum host=box ns_per_iter" and len(entry[1]["base"]) == len(entry[1]["head"]) == 3


def test_bad_input_is_one_line_and_exit_2(history, tmp_path):
    root, repo, _, _ = history
    for args, said in (((repo / "exp", "--branch", "nope", "--once"), "--branch nope: no such branch"),
                       ((repo / "exp", "--branch", "main", "--max-commits", "0"), "--max-commits must be"),
                       ((repo / "exp", "--branch", "main", "--interval", "soon"), "--interval 'soon'")):
        done = watch(tmp_path, *args, "--db", tmp_path / "w.db", cache=root / "cache")
        assert done.returncode == 2 and said in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_edivisive_finds_a_spread_step_not_one_noisy_pair():
    from flagbench.watch.edivisive import change_points

    rng = np.random.default_rng(7)
    step = [*rng.normal(100, 2, 12), *rng.normal(106, 2, 12)]   # 6 %: three sigma of one point
    assert change_points(step) in ([11], [12], [13])
    one = [*rng.normal(100, 2, 12), 112.0, *rng.normal(100, 2, 11)]
    assert change_points(one) == []
    assert change_points([5.0] * 10) == []
    assert change_points(step) == change_points(step)   # seeded: the same answer each time


def _timed_history(levels: list[float | None], seed: int):
    """A branch history of timed commits (None: not timed), each a pair of 5 noisy samples a side
    around the level before it and its own: the shape loop.py stores."""
    from flagbench.watch.changes import History
    from flagbench.watch.evidence import Evidence

    rng = np.random.default_rng(seed)
    rows, before = [], levels[0]
    for i, level in enumerate(levels):
        sha = f"{i:040x}"
        ev = Evidence(sha, f"{i - 1:040x}" if i else "", True, counts={"b insns_per_iter": 10.0},
                      base_counts={"b insns_per_iter": 10.0}, profile={"b": {"f": 10.0}}, changed=["f"])
        if level is not None:
            ev.timed = {"b ns_per_iter": {"base": list(rng.normal(before, 0.03 * before, 5)),
                                          "head": list(rng.normal(level, 0.03 * level, 5)), "unit": "ns"}}
            before = level
        rows.append((sha, f"commit {i}", True, ev))
    return History("main", rows)


def test_timed_change_points_over_the_history_not_one_noisy_pair():
    from flagbench.watch import findings_of, report

    step = [100.0, None, 100, None, 100, 100, None, 104, 104, None, 104, 104, 104, None]   # a 4 % step at 7
    (f,) = [f for f in findings_of([_timed_history(step, 3)], 0.1) if f.kind == "timed"]
    assert f.sha == f"{7:040x}" and f.metric == "b ns_per_iter" and f.cause == "direct"
    text = report.body(f, repo="r", config="c", command="flagbench series e a..b", evidence="x")
    assert "b ns_per_iter" in text and "cause: direct: f" in text
    flat = [100.0, None, 100, 100, 100, 103.5, 100, None, 100, 100, 100, 100]   # one pair 3.5 % off, alone
    assert [f for f in findings_of([_timed_history(flat, 4)], 0.1) if f.kind == "timed"] == []


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()), reason="chromium and chromium-driver")
def test_dashboard_renders_in_chromium_with_the_change_points(history, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    root, repo, kinds, done = history
    page = root / "out" / "index.html"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--window-size=1280,1000", f"--user-data-dir={tmp_path}/p"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        driver.get(page.as_uri())
        driver.save_screenshot(str(tmp_path / "watch.png"))
        plots = [p for p in driver.find_elements("css selector", "svg.plot") if p.size["width"] > 50]
        assert plots
        marked = {c.get_attribute("data-sha")[:12] for c in driver.find_elements("css selector", "circle.change")}
        assert marked == {sha for sha, kind, _ in findings(done.stdout) if kind == "exact"}
        first = driver.find_elements("css selector", "circle.change")[0]
        sha = first.get_attribute("data-sha")
        driver.execute_script("arguments[0].parentNode.dispatchEvent(new MouseEvent('click', {bubbles: true}))",
                              first)
        assert driver.current_url.endswith(f"#c-{sha}")
        row = driver.find_element("id", f"c-{sha}")
        assert "cause: direct" in row.text and row.is_displayed()
        assert [e for e in driver.get_log("browser") if e["level"] == "SEVERE"] == []
    finally:
        driver.quit()
