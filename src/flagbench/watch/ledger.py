"""The watch's memory, in the results database beside the runs (its own tables, its own
connection; each write committed at once, WAL mode as store.py keeps it): a restart resumes
from here and measures nothing twice.

    watch_branches   (watch, branch) -> the first commit watched from, the tip last followed
    watch_commits    (watch, sha) -> the commit's evidence (JSON), its build status, the store run
                     holding its samples; a commit is measured once whatever branches hold it
    watch_members    (watch, branch, sha) -> its place on the branch's first-parent chain, and
                     whether it is still there (a force-push leaves the old ones marked)

`watch` is the subject's key (repository, experiment, variant, target, compiler).
"""
from __future__ import annotations

import datetime
import json
import sqlite3
from pathlib import Path

from flagbench.errors import UserError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS watch_branches (
    watch TEXT NOT NULL, branch TEXT NOT NULL, since TEXT, tip TEXT,
    PRIMARY KEY (watch, branch));
CREATE TABLE IF NOT EXISTS watch_commits (
    watch TEXT NOT NULL, sha TEXT NOT NULL, subject TEXT NOT NULL, status TEXT NOT NULL,
    evidence TEXT NOT NULL, run_id INTEGER, measured TEXT NOT NULL,
    PRIMARY KEY (watch, sha));
CREATE TABLE IF NOT EXISTS watch_members (
    watch TEXT NOT NULL, branch TEXT NOT NULL, sha TEXT NOT NULL, position INTEGER NOT NULL,
    on_branch INTEGER NOT NULL, PRIMARY KEY (watch, branch, sha));
"""


class Ledger:
    def __init__(self, path: Path, watch: str):
        self.watch = watch
        try:
            self.db = sqlite3.connect(str(path), timeout=60, isolation_level=None)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            raise UserError(f"{path}: cannot keep the watch's records: {e}") from None

    def close(self) -> None:
        self.db.close()

    def _one(self, sql: str, *params):
        rows = self.db.execute(sql, params).fetchall()
        return rows[0] if rows else None

    # -- branches -------------------------------------------------------------------------------
    def branch(self, branch: str) -> tuple[str | None, str | None]:
        """(since, tip) of a branch watched before, (None, None) for a new one."""
        r = self._one("SELECT since, tip FROM watch_branches WHERE watch=? AND branch=?", self.watch, branch)
        return (r["since"], r["tip"]) if r else (None, None)

    def set_branch(self, branch: str, since: str | None, tip: str | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO watch_branches VALUES (?, ?, ?, ?)", (self.watch, branch, since, tip))

    def branches(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT branch FROM watch_branches WHERE watch=? ORDER BY branch",
                                              (self.watch,))]

    # -- membership -----------------------------------------------------------------------------
    def set_chain(self, branch: str, shas: list[str]) -> list[str]:
        """The branch's chain is SHAS now: members not in it are marked gone (returned)."""
        now = set(shas)
        gone = [r[0] for r in self.db.execute(
            "SELECT sha FROM watch_members WHERE watch=? AND branch=? AND on_branch=1", (self.watch, branch))
            if r[0] not in now]
        with self.db:
            self.db.execute("BEGIN")
            for sha in gone:
                self.db.execute("UPDATE watch_members SET on_branch=0 WHERE watch=? AND branch=? AND sha=?",
                                (self.watch, branch, sha))
            for i, sha in enumerate(shas):
                self.db.execute("INSERT OR REPLACE INTO watch_members VALUES (?, ?, ?, ?, 1)",
                                (self.watch, branch, sha, i))
        return gone

    def members(self, branch: str) -> list[tuple[str, int, bool]]:
        """(sha, position, on the branch) in chain order; gone ones after, in their old order."""
        rows = self.db.execute("SELECT sha, position, on_branch FROM watch_members WHERE watch=? AND branch=? "
                               "ORDER BY on_branch DESC, position", (self.watch, branch)).fetchall()
        return [(r[0], r[1], bool(r[2])) for r in rows]

    # -- commits --------------------------------------------------------------------------------
    def evidence(self, sha: str) -> dict | None:
        r = self._one("SELECT evidence FROM watch_commits WHERE watch=? AND sha=?", self.watch, sha)
        if r is None:
            return None
        try:
            return json.loads(r[0])
        except ValueError:
            return None   # damaged: measured again

    def subject(self, sha: str) -> str:
        r = self._one("SELECT subject FROM watch_commits WHERE watch=? AND sha=?", self.watch, sha)
        return r[0] if r else ""

    def put(self, sha: str, subject: str, status: str, evidence: dict, run_id: int | None) -> None:
        self.db.execute("INSERT OR REPLACE INTO watch_commits VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (self.watch, sha, subject, status, json.dumps(evidence), run_id,
                         datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")))

    def measured(self) -> int:
        return self._one("SELECT count(*) FROM watch_commits WHERE watch=?", self.watch)[0]
