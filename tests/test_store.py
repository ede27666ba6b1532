"""The sample store: what is committed survives a SIGKILL, resume sees finished cells, bad files are UserErrors."""
import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from flagbench.errors import UserError
from flagbench.store import SCHEMA_VERSION, Store, split_cell

WRITER = r"""
import sys
from pathlib import Path
from flagbench.store import Store
db = Store(Path(sys.argv[1]))
run = db.start_run("exp", "hash1", {})
print(run, flush=True)
i = 0
while True:
    cell = f"v{i % 2}/x86_64/gcc:size={i}"
    db.add_sample(run, "loop", cell, "ns_per_iter", float(i), unit="ns", executor="native")
    db.finish_cell(run, "loop", cell, "ok")
    print(i, flush=True)   # printed only after both writes returned
    i += 1
"""


def test_sigkill_keeps_every_committed_sample(tmp_path):
    path = tmp_path / "fb.db"
    child = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    run_id = int(child.stdout.readline())
    acknowledged = -1
    while acknowledged < 30:                     # wait for a few dozen committed samples, not for a time
        acknowledged = int(child.stdout.readline())
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL

    db = Store(path)
    values = [s["value"] for s in db.samples(run_id)]
    assert len(values) >= acknowledged + 1       # everything the child reported as written is there
    assert values == [float(i) for i in range(len(values))]
    finished = db.finished_cells(run_id)
    assert ("loop", "v0/x86_64/gcc:size=0") in finished
    assert len(finished) >= acknowledged + 1
    assert db.latest_run("hash1") == run_id      # a resumed `run` finds it


def test_resume_sees_ok_and_failed_cells_and_refinishing_updates(tmp_path):
    db = Store(tmp_path / "fb.db")
    run = db.start_run("exp", "h", {"variants": ["a", "b"]})
    db.finish_cell(run, "b1", "a/x86_64/gcc", "ok")
    db.finish_cell(run, "b1", "b/x86_64/gcc", "failed", "SIGBUS")
    assert db.finished_cells(run) == {("b1", "a/x86_64/gcc"), ("b1", "b/x86_64/gcc")}
    db.finish_cell(run, "b1", "b/x86_64/gcc", "ok")
    assert [c["status"] for c in db.cells(run)] == ["ok", "ok"]
    other = db.start_run("exp", "h", {})
    assert db.finished_cells(other) == set()
    assert db.latest_run("h") == other and db.latest_run("nope") is None
    with pytest.raises(ValueError):
        db.finish_cell(run, "b1", "a/x86_64/gcc", "meh")


def test_provenance_per_run_and_per_sample(tmp_path):
    db = Store(tmp_path / "fb.db")
    run = db.start_run("exp", "h", {"note": "x"})
    db.add_sample(run, "sweep", "fast/aarch64/clang:size=4096,dalign=3,salign=1", "MB/s", 1234.5, unit="MB/s",
                  executor="qemu", provenance={"cflags": ["-O2"], "tools": {"clang": "clang version 19"}})
    info = db.run(run)
    prov = info["provenance"]
    assert prov["note"] == "x" and prov["flagbench"] and prov["kernel"].startswith(os.uname().sysname)
    assert prov["cpu"] and len(prov["loadavg"]) == 3 and prov["host"]
    assert info["n_samples"] == 1
    s = db.samples(run)[0]
    assert (s["variant"], s["target"], s["compiler"]) == ("fast", "aarch64", "clang")
    assert s["params"] == {"size": "4096", "dalign": "3", "salign": "1"}
    assert s["provenance"]["cflags"] == ["-O2"] and s["executor"] == "qemu" and s["unit"] == "MB/s"
    raw = sqlite3.connect(tmp_path / "fb.db")
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(UserError, match="no run 99"):
        db.run(99)


def test_two_stores_on_one_file_see_each_others_writes(tmp_path):
    a, b = Store(tmp_path / "fb.db"), Store(tmp_path / "fb.db")
    run = a.start_run("exp", "h", {})
    b.add_sample(run, "x", "v/x86_64/gcc", "wall_ns", 5, unit="ns", executor="native")
    assert len(a.samples(run)) == 1


def test_bad_paths_and_files_are_user_errors(tmp_path):
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not sqlite at all\n" * 200)
    with pytest.raises(UserError, match="garbage.db"):
        Store(garbage)
    with pytest.raises(UserError):
        Store(tmp_path / "no" / "such" / "dir" / "fb.db")
    with pytest.raises(UserError, match="directory"):
        Store(tmp_path)
    with pytest.raises(UserError, match="no such results database"):
        Store(tmp_path / "missing.db", create=False)
    assert not (tmp_path / "missing.db").exists()
    foreign = tmp_path / "foreign.db"
    sqlite3.connect(foreign).execute("CREATE TABLE t (x)")
    with pytest.raises(UserError, match="not a flagbench"):
        Store(foreign)
    newer = tmp_path / "newer.db"
    sqlite3.connect(newer).execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(UserError, match="newer"):
        Store(newer)


def test_split_cell_without_params_or_compiler():
    assert split_cell("a/b/c") == {"variant": "a", "target": "b", "compiler": "c", "params": {}}
    assert split_cell("a")["target"] == ""


def test_samples_of_one_job_are_stored_together_or_not_at_all(tmp_path):
    with Store(tmp_path / "fb.db") as db:
        run = db.start_run("e", "h", {})
        db.add_samples(run, [("w", "A/x86_64/gcc", "per_second", 1.0, "iter/s", "wis", {"sample": 1}),
                             ("w", "A/x86_64/gcc", "per_second", 2.0, "iter/s", "wis", {"sample": 1})])
        with pytest.raises(Exception):   # the second row is not a number: neither is stored
            db.add_samples(run, [("w", "A/x86_64/gcc", "per_second", 3.0, "iter/s", "wis", {}),
                                 ("w", "A/x86_64/gcc", "per_second", "x", "iter/s", "wis", {})])
        assert [s["value"] for s in db.samples(run)] == [1.0, 2.0]


def test_one_writer_per_database_and_who_holds_it(tmp_path):
    with Store(tmp_path / "fb.db") as first, Store(tmp_path / "fb.db") as second:
        with first.writer("flagbench run a"):
            with pytest.raises(UserError, match=rf"is being written by pid {os.getpid()} \(flagbench run a\)"):
                with second.writer("flagbench run b"):
                    pass
        with second.writer("flagbench run b"):       # released when the first is done
            pass


def test_one_writer_per_database_file_whatever_the_path(tmp_path):
    """A symlink to the database, or a path through `..`, names the same file: the same writer lock."""
    (tmp_path / "x").mkdir()
    real = tmp_path / "fb.db"
    (tmp_path / "link.db").symlink_to(real)
    (tmp_path / "x" / "dir-link").symlink_to(tmp_path, target_is_directory=True)
    with Store(real) as first, first.writer("flagbench run a"):
        for other in (tmp_path / "link.db", tmp_path / "x" / ".." / "fb.db",
                      tmp_path / "x" / "dir-link" / "link.db"):
            with Store(other) as second:
                with pytest.raises(UserError, match="is being written by"):
                    with second.writer("flagbench run b"):
                        pass


def _stored_run(path):
    """A store with one run of two variants, as `flagbench run` leaves it."""
    with Store(path) as db:
        run = db.start_run("exp", "h" * 64, {"variants": ["a", "b"]})
        for variant, base in (("a", 100.0), ("b", 90.0)):
            for i in range(5):
                db.add_sample(run, "loop", f"{variant}/x86_64/gcc", "ns_per_iter", base + i, unit="ns",
                              executor="native")
            db.finish_cell(run, "loop", f"{variant}/x86_64/gcc", "ok")
    return run


HAND_EDITS = {
    "provenance not json": "UPDATE runs SET provenance = '{not json'",
    "provenance a list": "UPDATE runs SET provenance = '[]'",
    "provenance a number": "UPDATE runs SET provenance = '5'",
    "sample value text": "UPDATE samples SET value = 'fast' WHERE id = 3",
    "sample value inf": "UPDATE samples SET value = 9e999 WHERE id = 3",
    "sample provenance not json": "UPDATE samples SET provenance = 'x' WHERE id = 2",
    "experiment hash a number": "UPDATE runs SET experiment_hash = 5",
    "started a blob": "UPDATE runs SET started = x'00ff'",
    "loadavg a string": "UPDATE runs SET provenance = '{\"loadavg\": \"high\", \"variants\": 3}'",
}


@pytest.mark.parametrize("edit", HAND_EDITS, ids=list(HAND_EDITS))
def test_a_store_edited_by_hand_is_one_line_not_a_traceback(tmp_path, edit):
    from conftest import flagbench

    path = tmp_path / "fb.db"
    _stored_run(path)
    raw = sqlite3.connect(path)
    raw.execute(HAND_EDITS[edit])
    raw.commit()
    raw.close()
    for args in (["report"], ["report", "--format", "json"], ["report", "--list"]):
        done = flagbench(*args, "--db", path, cwd=tmp_path)
        assert "Traceback" not in done.stderr and "Warning" not in done.stderr, done.stderr
        assert done.returncode in (0, 2), (args, done.returncode, done.stderr)
        if done.returncode == 2:
            assert len(done.stderr.strip().splitlines()) == 1 and str(path) in done.stderr, done.stderr
    if edit.startswith(("provenance", "sample")):   # damage the report cannot show around
        done = flagbench("report", "--db", path, cwd=tmp_path)
        assert done.returncode == 2 and "by hand" in done.stderr, done.stderr


def _read_only(directory):
    """argv prefix that runs a command with `directory` read-only even for root (a private
    read-only bind mount), or None where user namespaces are not allowed."""
    import shutil
    if shutil.which("unshare") is None:
        return None
    prefix = ["unshare", "-rm", "sh", "-c",
              'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"', str(directory)]
    if subprocess.run([*prefix, "true"], capture_output=True).returncode != 0:
        return None
    return prefix


def test_report_reads_a_database_in_a_read_only_directory(tmp_path):
    from conftest import ROOT

    ro = tmp_path / "ro"
    ro.mkdir()
    _stored_run(ro / "fb.db")
    assert not (ro / "fb.db-wal").exists()       # a finished run leaves the one file
    prefix = _read_only(ro)
    if prefix is None and os.geteuid() == 0:
        pytest.skip("root ignores directory permissions and unshare is not allowed here")
    ro.chmod(0o555)
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        argv = [*(prefix or []), sys.executable, "-m", "flagbench", "report", "--db", str(ro / "fb.db"),
                "--format", "json"]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    finally:
        ro.chmod(0o755)
    assert done.returncode == 0, done.stderr
    import json
    doc = json.loads(done.stdout)
    assert [t["variants"] for t in doc["tables"]] == [["a", "b"]]
    assert sorted(os.listdir(ro)) == ["fb.db"]   # nothing written beside it


def test_a_store_of_schema_1_keeps_its_profiles(tmp_path):
    """Schema 1 kept profiles in a table `flagbench profile` made beside the store's own; schema 2
    owns that table: read as it is (read-only), then migrated in place with its rows."""
    path = tmp_path / "fb.db"
    _stored_run(path)
    raw = sqlite3.connect(path)
    raw.executescript("""DROP TABLE profiles; PRAGMA user_version=1;
        CREATE TABLE profiles (experiment_hash TEXT NOT NULL, bench TEXT NOT NULL, target TEXT NOT NULL,
            compiler TEXT NOT NULL, variant TEXT NOT NULL, source TEXT NOT NULL, profile TEXT NOT NULL,
            PRIMARY KEY (experiment_hash, bench, target, compiler, variant, source));""")
    old = {"bench": "loop", "target": "x86_64", "compiler": "gcc", "variant": "a", "exact": True,
           "source": "callgrind", "total": 4, "symbols": [{"name": "loop", "self": 4}]}
    raw.execute("INSERT INTO profiles VALUES ('h', 'loop', 'x86_64', 'gcc', 'a', 'callgrind', ?)",
                (__import__("json").dumps(old),))
    raw.commit()
    raw.close()
    with Store(path, create=False) as db:
        assert db.profiles("h") == [old]
    with Store(path) as db:
        assert db.profiles("h", {"variant": "a", "source": "callgrind"}) == [old]
        assert db.profiles("h", {"variant": "b"}) == []
        with pytest.raises(RuntimeError):               # profiles are the writer's, like samples of a run
            db.put_profile("h", {**old, "variant": "b"})
        with db.writer("test"):
            db.put_profile("h", {**old, "variant": "b"})
        assert [p["variant"] for p in db.profiles("h")] == ["a", "b"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 3


def test_a_fifo_given_as_the_database_is_refused_at_once(tmp_path):
    from conftest import flagbench

    os.mkfifo(tmp_path / "fb.db")
    for args in (["report"], ["report", "--list"]):
        done = flagbench(*args, "--db", tmp_path / "fb.db", cwd=tmp_path, timeout=60)   # it used to wait forever
        assert done.returncode == 2 and "is a FIFO" in done.stderr, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
    with pytest.raises(UserError, match="is a FIFO"):
        Store(tmp_path / "fb.db")
