"""Every benchmark sample, with where it came from, in one SQLite file (default ./flagbench.db).

Each write is its own transaction, committed before `add_sample` returns, in WAL mode:
a run killed with SIGKILL keeps every sample it had taken, and a new run of the same
experiment resumes from `finished_cells`. (synchronous=NORMAL: in WAL mode that survives
a killed process; only a power cut could lose the last few samples.)

>>> import tempfile, pathlib
>>> db = Store(pathlib.Path(tempfile.mkdtemp()) / "fb.db")
>>> run = db.start_run("demo", "abc123", {"note": "doctest"})
>>> db.add_sample(run, "loop", "O2/x86_64/gcc", "ns_per_iter", 29.6, unit="ns", executor="native")
>>> db.finish_cell(run, "loop", "O2/x86_64/gcc", "ok")
>>> db.finished_cells(run), db.latest_run("abc123") == run
({('loop', 'O2/x86_64/gcc')}, True)
>>> s = db.samples(run)[0]
>>> s["variant"], s["target"], s["compiler"], s["value"]
('O2', 'x86_64', 'gcc', 29.6)
"""
from __future__ import annotations

import datetime
import fcntl
import json
import math
import os
import platform
import socket
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from flagbench import __version__
from flagbench.errors import UserError, not_a_file

SCHEMA_VERSION = 3                    # 2: profiles; 3: metric declarations
DEFAULT_DB = Path("flagbench.db")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    experiment TEXT NOT NULL,
    experiment_hash TEXT NOT NULL,
    started TEXT NOT NULL,
    provenance TEXT NOT NULL          -- JSON: cpu, kernel, load average, host, flagbench version, ...
);
CREATE TABLE IF NOT EXISTS samples (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    bench TEXT NOT NULL,
    cell TEXT NOT NULL,               -- variant/target/compiler[:k=v,k=v]
    metric TEXT NOT NULL,
    value REAL NOT NULL,
    unit TEXT NOT NULL,
    executor TEXT NOT NULL,
    taken TEXT NOT NULL,
    provenance TEXT NOT NULL          -- JSON: compiler versions, flags, ... of this sample
);
CREATE INDEX IF NOT EXISTS samples_by_run ON samples(run_id, bench, cell);
CREATE TABLE IF NOT EXISTS cells (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    bench TEXT NOT NULL,
    cell TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    reason TEXT,
    finished TEXT NOT NULL,
    PRIMARY KEY (run_id, bench, cell)
);
CREATE TABLE IF NOT EXISTS profiles (
    experiment_hash TEXT NOT NULL, bench TEXT NOT NULL, target TEXT NOT NULL, compiler TEXT NOT NULL,
    variant TEXT NOT NULL, source TEXT NOT NULL,
    profile TEXT NOT NULL,            -- JSON: profile.Profile.to_json()
    PRIMARY KEY (experiment_hash, bench, target, compiler, variant, source)
);
CREATE TABLE IF NOT EXISTS metrics (  -- what a run's metrics are, as declared where emitted (metrics.py)
    run_id INTEGER NOT NULL REFERENCES runs(id),
    name TEXT NOT NULL,
    declaration TEXT NOT NULL,        -- JSON: metrics.Metric.to_json()
    PRIMARY KEY (run_id, name)
);
"""
_TABLES = {"runs", "samples", "cells", "profiles", "metrics"}
PROFILE_KEY = ("bench", "target", "compiler", "variant", "source")   # one profile per these and experiment


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _cpu() -> tuple[str, list[str]]:
    """The CPU's model name and its copy features (hosts.facts.copy_features), from one read of /proc/cpuinfo."""
    from flagbench.hosts.facts import copy_features
    model, features = None, []
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if model is None and line.startswith(("model name", "Model", "cpu model")):
                model = line.split(":", 1)[1].strip()
            elif not features and line.startswith(("flags", "Features")):
                features = copy_features(line.split(":", 1)[1])
    except OSError:
        pass
    return model or platform.processor() or platform.machine(), features


def host_provenance() -> dict:
    """What the machine looked like when a run started."""
    uname = os.uname()
    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    cpu, features = _cpu()
    return {"cpu": cpu, "cpu_features": features, "cpus": os.cpu_count(), "kernel": f"{uname.sysname} {uname.release} {uname.version}",
            "machine": uname.machine, "loadavg": load, "host": socket.gethostname(), "time": _now(),
            "flagbench": __version__}


def _prov(p) -> dict:
    """A sample's provenance as stored: a provenance.SampleRecord (what the engine writes) or a dict."""
    return p.to_json() if hasattr(p, "to_json") else (p or {})


def split_cell(cell: str) -> dict:
    """"variant/target/compiler:size=4096,dalign=3" -> its parts; params keep their order.

    >>> split_cell("strict/loongarch64/clang:size=4096,dalign=3")
    {'variant': 'strict', 'target': 'loongarch64', 'compiler': 'clang', 'params': {'size': '4096', 'dalign': '3'}}
    """
    head, _, tail = cell.partition(":")
    parts = head.split("/")
    parts += [""] * (3 - len(parts))
    params = {}
    for item in filter(None, tail.split(",")):
        key, _, value = item.partition("=")
        params[key] = value
    return {"variant": parts[0], "target": parts[1], "compiler": "/".join(parts[2:]), "params": params}


class Store:
    """The sample store. Safe to share between threads; several processes may write at once (WAL).

    create=False: the database must exist and is opened read-only (nothing is written, not
    even its WAL files), so a database in a read-only directory can be reported."""

    def __init__(self, path: Path = DEFAULT_DB, *, create: bool = True):
        self.path = Path(path)
        self.readonly = not create
        problem = not_a_file(self.path)
        if problem == "does not exist" and not create:
            raise UserError(f"{self.path}: no such results database (run `flagbench run` first, or pass --db)")
        if problem and problem != "does not exist":   # a FIFO would block sqlite's first read
            raise UserError(f"{self.path} {problem}: not a results database")
        self._lock = threading.Lock()
        self._writing = False          # this Store holds the database's writer lock
        try:
            self._db = self._connect()
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise UserError(f"{self.path}: results database schema {version} is newer than this "
                                f"flagbench understands ({SCHEMA_VERSION}); upgrade flagbench")
            self._tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if version == 0 and self._tables - _TABLES:
                raise UserError(f"{self.path}: an SQLite file, but not a flagbench results database")
            if not self.readonly:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
                self._db.execute("PRAGMA foreign_keys=ON")
                if version < SCHEMA_VERSION:
                    with self._lock:
                        self._db.executescript(f"BEGIN; {_SCHEMA} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;")
                    self._tables |= _TABLES
        except sqlite3.DatabaseError as e:
            raise UserError(f"{self.path}: cannot use as results database: {e}") from None

    def _connect(self) -> sqlite3.Connection:
        def connect(target, **kw) -> sqlite3.Connection:
            db = sqlite3.connect(target, timeout=30, isolation_level=None, check_same_thread=False, **kw)
            db.row_factory = sqlite3.Row
            return db

        if not self.readonly:
            return connect(self.path)
        uri = self.path.resolve().as_uri()
        db = connect(f"{uri}?mode=ro", uri=True)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            # WAL mode wants to make its -shm file; where the directory cannot be written no
            # writer can make a -wal either, so the file alone is the whole database
            db.close()
            return connect(f"{uri}?mode=ro&immutable=1", uri=True)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self, sql: str, params: tuple) -> sqlite3.Cursor:
        with self._lock:
            try:
                return self._db.execute(sql, params)   # autocommit: durable once this returns
            except sqlite3.DatabaseError as e:
                raise UserError(f"{self.path}: cannot write results: {e}") from None

    def _read(self, sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as e:
                raise UserError(f"{self.path}: cannot read results: {e}") from None

    def _damaged(self, where: str, what: str) -> UserError:
        return UserError(f"{self.path}: {where}: {what} (the database was damaged or edited by hand)")

    def _object(self, text, where: str) -> dict:
        """A JSON object column, or a UserError naming the row."""
        try:
            value = json.loads(text) if isinstance(text, (str, bytes)) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise self._damaged(where, f"provenance {str(text)[:40]!r} is not a JSON object")
        return value

    def _texts(self, row: sqlite3.Row, columns: tuple[str, ...], where: str) -> None:
        for c in columns:
            if not isinstance(row[c], str):
                raise self._damaged(where, f"{c} {row[c]!r} is not text")

    # -- runs --------------------------------------------------------------------------------

    def start_run(self, experiment: str, experiment_hash: str, provenance: dict | None = None) -> int:
        """A new run; host facts not given in `provenance` are filled in from this machine."""
        prov = {**host_provenance(), **(provenance or {})}
        cur = self._write("INSERT INTO runs (experiment, experiment_hash, started, provenance) VALUES (?, ?, ?, ?)",
                          (experiment, experiment_hash, _now(), json.dumps(prov, default=str)))
        return int(cur.lastrowid)

    def latest_run(self, experiment_hash: str) -> int | None:
        rows = self._read("SELECT max(id) FROM runs WHERE experiment_hash = ?", (experiment_hash,))
        return rows[0][0]

    def runs(self) -> list[dict]:
        rows = self._read("""SELECT r.*, (SELECT count(*) FROM samples s WHERE s.run_id = r.id) AS n_samples,
                                    (SELECT count(*) FROM cells c WHERE c.run_id = r.id AND c.status = 'failed') AS n_failed
                             FROM runs r ORDER BY r.id""")
        out = []
        for r in rows:
            self._texts(r, ("experiment", "experiment_hash", "started"), f"run {r['id']}")
            out.append({**dict(r), "provenance": self._object(r["provenance"], f"run {r['id']}")})
        return out

    def run(self, run_id: int) -> dict:
        for r in self.runs():
            if r["id"] == run_id:
                return r
        raise UserError(f"{self.path}: no run {run_id} (runs: {', '.join(str(r['id']) for r in self.runs()) or 'none'})")

    # -- samples and cells -------------------------------------------------------------------

    def add_sample(self, run_id: int, bench: str, cell: str, metric: str, value: float, *, unit: str,
                   executor: str, provenance: dict | None = None) -> None:
        self._write("""INSERT INTO samples (run_id, bench, cell, metric, value, unit, executor, taken, provenance)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (run_id, bench, cell, metric, float(value), unit, executor, _now(),
                     json.dumps(provenance or {}, default=str)))

    def add_samples(self, run_id: int, rows: list[tuple]) -> None:
        """Several samples in one transaction: all of them are stored, or none.
        rows: (bench, cell, metric, value, unit, executor, provenance)."""
        if not rows:
            return
        now = _now()
        with self._lock:
            try:
                with self._db:   # BEGIN ... COMMIT (ROLLBACK on error)
                    self._db.execute("BEGIN")
                    self._db.executemany(
                        """INSERT INTO samples (run_id, bench, cell, metric, value, unit, executor, taken, provenance)
                           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                        [(run_id, b, c, m, float(v), u, e, now, json.dumps(_prov(p), default=str))
                         for b, c, m, v, u, e, p in rows])
            except sqlite3.DatabaseError as e:
                raise UserError(f"{self.path}: cannot write results: {e}") from None

    @contextmanager
    def writer(self, what: str) -> Iterator[None]:
        """Hold the database's writer lock (a lock file next to it, released when this
        process ends however it ends): a second `flagbench run` on the same database is
        refused with the pid that holds it, so no run ever gets twice its samples. The lock
        belongs to the file, not to the path: a symlink or a path through `..` finds it."""
        real = self.path.resolve()
        lock_path = real.with_name(real.name + ".lock")
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise UserError(f"{lock_path}: cannot create the writer lock: {e.strerror or e}") from None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
                raise UserError(f"{self.path} is being written by {holder}; wait until it ends "
                                f"or give another --db") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} ({what})\n".encode(), 0)
            self._writing = True
            try:
                yield
            finally:
                self._writing = False
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)

    def finish_cell(self, run_id: int, bench: str, cell: str, status: str, reason: str | None = None) -> None:
        if status not in ("ok", "failed"):
            raise ValueError(f"cell status must be 'ok' or 'failed', not {status!r}")
        self._write("""INSERT INTO cells (run_id, bench, cell, status, reason, finished) VALUES (?, ?, ?, ?, ?, ?)
                       ON CONFLICT (run_id, bench, cell) DO UPDATE
                       SET status = excluded.status, reason = excluded.reason, finished = excluded.finished""",
                    (run_id, bench, cell, status, reason, _now()))

    def finished_cells(self, run_id: int) -> set[tuple[str, str]]:
        return {(r["bench"], r["cell"]) for r in self._read("SELECT bench, cell FROM cells WHERE run_id = ?", (run_id,))}

    def cells(self, run_id: int) -> list[dict]:
        """Every finished cell with its status and, for failures, the reason."""
        rows = self._read("SELECT * FROM cells WHERE run_id = ? ORDER BY bench, cell", (run_id,))
        for r in rows:
            self._texts(r, ("bench", "cell"), f"run {run_id}, a cell")
        return [{**dict(r), "reason": None if r["reason"] is None else str(r["reason"])} for r in rows]

    def samples(self, run_id: int) -> list[dict]:
        """Every sample of a run in the order taken, its cell split into variant/target/compiler/params.
        A value that is not a finite number was not measured: the store is damaged."""
        rows = self._read("SELECT * FROM samples WHERE run_id = ? ORDER BY id", (run_id,))
        out = []
        for r in rows:
            where = f"run {run_id}, sample {r['id']}"
            self._texts(r, ("bench", "cell", "metric", "unit", "executor"), where)
            value = r["value"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise self._damaged(where, f"value {value!r} is not a measurement")
            out.append({**dict(r), **split_cell(r["cell"]), "provenance": self._object(r["provenance"], where)})
        return out

    # -- metric declarations (metrics.py), by run ------------------------------------------------

    def declare_metrics(self, run_id: int, metrics: list) -> None:
        """Store what the run's metrics are (metrics.Metric); a name declared otherwise before in
        the same run (a resumed run of another flagbench) is refused: its samples would be read two ways."""
        known = self.metrics(run_id)
        for m in metrics:
            if m.name in known and known[m.name] != m:
                raise UserError(f"{self.path}: run {run_id} has metric {m.name} as {known[m.name]}, not {m}: "
                                "run with --fresh")
        with self._lock:
            try:
                with self._db:
                    self._db.execute("BEGIN")
                    self._db.executemany("INSERT OR IGNORE INTO metrics (run_id, name, declaration) VALUES (?, ?, ?)",
                                         [(run_id, m.name, json.dumps(m.to_json())) for m in metrics])
            except sqlite3.DatabaseError as e:
                raise UserError(f"{self.path}: cannot write results: {e}") from None

    def metrics(self, run_id: int) -> dict:
        """name -> metrics.Metric as the run declared them; {} for a run (or database) from before declarations."""
        from flagbench.metrics import Metric
        if "metrics" not in self._tables:   # an older database opened read-only: nothing declared
            return {}
        out = {}
        for r in self._read("SELECT name, declaration FROM metrics WHERE run_id = ? ORDER BY name", (run_id,)):
            where = f"run {run_id}, metric {r['name']}"
            try:
                out[r["name"]] = Metric.from_json(self._object(r["declaration"], where))
            except (TypeError, ValueError) as e:
                raise self._damaged(where, str(e)) from None
        return out

    # -- profiles (flagbench profile), by experiment -------------------------------------------

    def put_profile(self, experiment_hash: str, profile: dict) -> None:
        """A profile (profile.Profile.to_json()), replacing the one of the same bench, cell and source.
        Only the writer does this (`with store.writer(...)`): profiles are replaced, not added to."""
        if not self._writing:
            raise RuntimeError("put_profile outside Store.writer()")
        self._write("INSERT OR REPLACE INTO profiles VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (experiment_hash, *(profile[k] for k in PROFILE_KEY), json.dumps(profile)))

    def profiles(self, experiment_hash: str, key: dict | None = None) -> list[dict]:
        """The stored profiles of an experiment (those matching `key`), in the order stored."""
        if "profiles" not in self._tables:   # a read-only store from before profiles were kept here
            return []
        key = key or {}
        where = "".join(f" AND {k} = ?" for k in PROFILE_KEY if k in key)
        rows = self._read(f"SELECT profile FROM profiles WHERE experiment_hash = ?{where} ORDER BY rowid",
                          (experiment_hash, *(key[k] for k in PROFILE_KEY if k in key)))
        out = []
        for r in rows:
            try:
                doc = json.loads(r[0])
            except (TypeError, ValueError):
                doc = None
            if not isinstance(doc, dict) or not all(isinstance(doc.get(k), str) for k in PROFILE_KEY):
                raise self._damaged(f"a profile of {experiment_hash[:12]}", "not a JSON profile")
            out.append(doc)
        return out
