"""Patches applied with `git am` in a checkout flagbench owns: a clone of the user's repository
under the cache (`git clone --shared`: it reads the user's objects, never writes their
repository, index, work tree, refs or .git/worktrees), one per repository, reused and locked
while in use. Each patch is its own `git am`, so one that does not apply is a row (which file,
which hunk: `git apply --reject` says) and the next is applied onto the last that did.

    checkout(repo) -> Path                    the owned clone (made on first use)
    apply_series(repo, series, base) -> Applied
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from flagbench import procs, vcs
from flagbench.cache import cache_dir, locked
from flagbench.errors import UserError
from flagbench.mail import parse
from flagbench.mail.parse import MailSeries, Patch
from flagbench.textsafe import last_line, term_text

GIT_TIMEOUT = 1800     # the first checkout of a kernel tree writes ~75,000 files
_IDENTITY = {"GIT_COMMITTER_NAME": "flagbench", "GIT_COMMITTER_EMAIL": "flagbench@localhost"}


@dataclass
class Applied:
    repo: Path                                   # the user's repository (read only)
    clone: Path                                  # the owned checkout the commits live in
    base: vcs.Commit                             # of the clone
    results: list[tuple[Patch, vcs.Commit | None, str]] = field(default_factory=list)   # (patch, commit, why not)

    @property
    def commits(self) -> list[vcs.Commit]:
        return [c for _, c, _ in self.results if c is not None]


def checkout(repo: Path) -> Path:
    """The clone flagbench owns for REPO: <cache>/mail/<hash of REPO's path>/work."""
    home = cache_dir() / "mail" / hashlib.sha256(str(repo).encode()).hexdigest()[:16]
    return home / "work"


def _git(where: Path, *args: str, timeout: float = 300, stdin=None) -> procs.Done:
    env = vcs._env(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, **_IDENTITY)
    try:
        return procs.run(["git", "-C", str(where), *args], timeout=timeout, env=env,
                         **({"stdin": stdin} if stdin is not None else {}))
    except FileNotFoundError:
        raise UserError("git is not installed: apt-get install git") from None


def _ensure(repo: Path, clone: Path) -> None:
    if (clone / ".git").is_dir():
        _name_origin(repo, clone)
        return
    tmp = clone.with_name(f"{clone.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    done = _git(tmp.parent, "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(tmp), timeout=600)
    if done.failure:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"cannot clone {repo} into flagbench's cache: {last_line(done.stderr, done.failure)}")
    for key, value in (("core.hooksPath", os.devnull), ("am.threeWay", "false"), ("gc.auto", "0"),
                       ("user.name", "flagbench"), ("user.email", "flagbench@localhost")):
        _git(tmp, "config", key, value)
    _name_origin(repo, tmp)
    os.replace(tmp, clone)


def _name_origin(repo: Path, clone: Path) -> None:
    """The clone says whose it is (vcs.origin): a kernel commit of it is built in REPO's walked
    checkout and O= directory, beside REPO's own commits."""
    marker = clone / ".git" / vcs.ORIGIN
    if not marker.is_file() or marker.read_text().strip() != str(repo):
        marker.write_text(f"{repo}\n")


def apply_series(repo: Path, series: MailSeries, base_ref: str, say=lambda text: None) -> Applied:
    """SERIES' patches applied in order onto BASE_REF (a commit of REPO) in the owned clone."""
    clone = checkout(repo)
    clone.parent.mkdir(parents=True, exist_ok=True)
    try:
        base_user = vcs.resolve(repo, base_ref)
    except vcs.UnknownRef as e:
        raise UserError(f"{series.source}: {e}") from None
    with locked(clone.with_name("work.lock")):
        _ensure(repo, clone)
        say(f"applying {len(series.patches)} patch(es) onto {base_user.short} ({base_user.subject[:50]}) in {clone}")
        _git(clone, "am", "--abort")
        _narrow(clone, series)
        done = _git(clone, "checkout", "--quiet", "--force", "--detach", base_user.sha, timeout=GIT_TIMEOUT)
        if done.failure:
            raise UserError(f"cannot check out {base_user.short} in {clone}: {last_line(done.stderr, done.failure)}")
        _git(clone, "clean", "-fdxq", timeout=GIT_TIMEOUT)
        applied = Applied(repo, clone, vcs.resolve(clone, base_user.sha))
        mail = clone.with_name("patch.mbox")
        for p in series.patches:
            if p.binary:
                applied.results.append((p, None, "does not apply: a binary patch (flagbench applies text only)"))
                continue
            mbox_line = b"" if p.raw.startswith(b"From ") else b"From flagbench Mon Sep 17 00:00:00 2001\n"
            mail.write_bytes(mbox_line + p.raw)
            done = _git(clone, "am", "--quiet", "--empty=drop", "--committer-date-is-author-date", str(mail))
            if done.failure:
                why = _why_not(clone, mail, done)
                _git(clone, "am", "--abort")
                _git(clone, "reset", "--quiet", "--hard", "HEAD", timeout=GIT_TIMEOUT)
                _git(clone, "clean", "-fdxq", timeout=GIT_TIMEOUT)
                applied.results.append((p, None, why))
                say(f"{p.label} {p.subject[:50]}: {why}")
                continue
            head = _git(clone, "rev-parse", "HEAD").stdout.strip()
            parent = applied.commits[-1].sha if applied.commits else applied.base.sha
            if head == parent:
                applied.results.append((p, None, "does not apply: an empty patch (nothing to change)"))
                continue
            commit = vcs.resolve(clone, head)
            _git(clone, "update-ref", f"refs/flagbench/mail/{commit.sha}", commit.sha)   # kept from gc
            applied.results.append((p, commit, ""))
        mail.unlink(missing_ok=True)
    return applied


_PLAIN_PATH = re.compile(r"[A-Za-z0-9._/+,@=~-]+")


def _narrow(clone: Path, series: MailSeries) -> None:
    """The clone's work tree holds only the files the patches name (a sparse checkout): git am
    needs no more, and a kernel tree is 75,000 files (the builds walk their own checkout). A
    path a pattern could not name exactly (a glob character, a space, a quoted name) takes the
    whole tree."""
    wanted = sorted({path for p in series.patches for path in parse.paths(p)})
    if not wanted or not all(_PLAIN_PATH.fullmatch(w) for w in wanted):
        _git(clone, "sparse-checkout", "disable", timeout=GIT_TIMEOUT)
        return
    patterns = clone.with_name("sparse-patterns")
    patterns.write_text("".join(f"/{w}\n" for w in wanted))
    with patterns.open("rb") as stdin:
        done = _git(clone, "sparse-checkout", "set", "--no-cone", "--stdin", timeout=GIT_TIMEOUT, stdin=stdin)
    if done.failure:
        raise UserError(f"cannot narrow {clone} to the patches' files: {last_line(done.stderr, done.failure)}")


_REJECTED = re.compile(r"^Applying patch (\S+) with (\d+) reject", re.M)
_HUNK = re.compile(r"^Rejected hunk #(\d+)\.", re.M)


def _why_not(clone: Path, mail: Path, done: procs.Done) -> str:
    """Which file and hunk did not apply: `git apply --reject` on the am's patch says (it
    writes .rej files in the owned clone, cleaned after)."""
    patch = clone / ".git" / "rebase-apply" / "patch"
    if patch.is_file():
        tried = _git(clone, "apply", "--reject", "--verbose", str(patch))
        text = tried.stdout + tried.stderr
        where = _REJECTED.search(text)
        if where:
            hunks = _HUNK.findall(text[where.end():])
            return (f"does not apply: {term_text(where.group(1))} hunk #{hunks[0] if hunks else '?'}"
                    f" ({where.group(2)} rejected)")
        missing = re.search(r"^error: (\S+): (does not exist in index|No such file or directory|already exists.*)$",
                            text, re.M)
        if missing:
            return f"does not apply: {term_text(missing.group(1))} {missing.group(2)}"
    return f"does not apply: {term_text(last_line(done.stderr or done.stdout, done.failure or 'git am failed'))[:160]}"
