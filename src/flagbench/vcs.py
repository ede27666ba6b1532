"""Git repositories as sources: refs resolved to commits, commits materialised as trees
that flagbench owns, in its cache.

Only read-only plumbing runs against the user's repository: rev-parse, log, rev-list,
and read-tree with a private index (GIT_INDEX_FILE in the cache) and a work tree in the
cache. Nothing here checks out, resets, stashes, moves a branch or writes the user's index
or .git/worktrees; GIT_OPTIONAL_LOCKS=0 keeps even a refresh from rewriting their index.

API (for spec, kernel/source, series, bisect):

    repo_root(path) -> Path | None          the top of the work tree that holds PATH
    resolve(repo, ref) -> Commit            `git rev-parse --verify REF^{commit}`, its tree and subject;
                                            UnknownRef (a UserError) when it names no commit
    commits(repo, base, head) -> [Commit]   `git rev-list --reverse BASE..HEAD`: oldest first
    show(commit, path) -> bytes | None      a file of the commit's tree, None when it has none
    parse_range("A..B") -> ("A", "B")       a range as `series` and `bisect` take it
    export(commit, dest) -> Path            DEST holds the commit's tree (made once, atomically;
                                            a DEST that holds it already is left as it is)
    walk(commit, dest) -> list[str]         DEST (a checkout flagbench owns) moved to the commit:
                                            only files that differ are written (their mtime
                                            changes, the rest keep theirs: make rebuilds just
                                            what changed, as ktest.pl's walk does). The paths
                                            that changed are returned.

A Commit's `tree` is the content's name: two refs with one tree are one build (key cells by it).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from flagbench import procs
from flagbench.cache import locked
from flagbench.errors import UserError

GIT_TIMEOUT = 1800          # a checkout of a kernel tree writes ~75,000 files
MARKER = ".flagbench-tree"  # in an export: the tree sha it holds (written last)
# The caller's git environment would redirect our commands to another repository or index.
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


class UnknownRef(UserError):
    """A ref that names no commit of the repository (spec adds the experiment's FILE:LINE)."""


@dataclass(frozen=True)
class Commit:
    repo: Path         # the work tree's top (or a bare repository)
    ref: str           # as the user wrote it: "v6.1", "HEAD~2", a sha
    sha: str           # the commit, 40 hex
    tree: str          # its tree object, 40 hex: what the content is called
    subject: str       # the first line of its message

    @property
    def short(self) -> str:
        return self.sha[:12]

    def as_dict(self) -> dict:
        """For provenance records."""
        return {"repo": str(self.repo), "ref": self.ref, "sha": self.sha, "tree": self.tree,
                "subject": self.subject}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env.update({"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
    env.update(extra)
    return env


def _git(repo: Path, *args: str, timeout: float = 120, env: dict | None = None) -> procs.Done:
    try:
        return procs.run(["git", "-C", str(repo), *args], timeout=timeout, env=env or _env())
    except FileNotFoundError:
        raise UserError("git is not installed: apt-get install git") from None


def repo_root(path: str | Path) -> Path | None:
    """The top of the git work tree holding PATH (a file or directory), None when none does."""
    path = Path(path)
    where = path if path.is_dir() else path.parent
    done = _git(where, "rev-parse", "--show-toplevel")
    if done.failure or not done.stdout.strip():
        return None
    return Path(done.stdout.strip()).resolve()


def _git_dir(repo: Path) -> Path:
    done = _git(repo, "rev-parse", "--absolute-git-dir")
    if done.failure:
        raise UserError(f"{repo}: not a git repository")
    return Path(done.stdout.strip())


def _describe(repo: Path, ref: str, sha: str) -> Commit:
    done = _git(repo, "log", "-1", "--format=%H%x00%T%x00%s", sha, "--")
    full, tree, subject = done.stdout.rstrip("\n").split("\0", 2)
    return Commit(repo, ref, full, tree, subject)


def resolve(repo: str | Path, ref: str) -> Commit:
    """The commit REF names in REPO; UnknownRef (one line) when it names none."""
    repo = Path(repo)
    if not ref or ref.startswith("-") or any(c.isspace() or c == "\0" for c in ref):
        raise UnknownRef(f"ref {ref!r}: not a git revision (a tag, a branch, HEAD~2, a sha)")
    if repo_root(repo) is None and _git(repo, "rev-parse", "--is-bare-repository").stdout.strip() != "true":
        raise UnknownRef(f"ref {ref!r}: {repo} is not a git repository")
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if done.failure or not done.stdout.strip():
        raise UnknownRef(f"ref {ref!r} names no commit in {repo}")
    return _describe(repo, ref, done.stdout.strip())


def show(commit: Commit, path: str) -> bytes | None:
    """The bytes of PATH in the commit's tree (no checkout), None when the tree has no such file."""
    try:
        done = subprocess.run(["git", "-C", str(commit.repo), "cat-file", "blob", f"{commit.tree}:{path}"],
                              env=_env(), capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def parse_range(text: str) -> tuple[str, str]:
    """"BASE..HEAD" -> ("BASE", "HEAD"); "BASE.." means up to HEAD."""
    if "..." in text or text.count("..") != 1:
        raise UserError(f"range {text!r}: BASE..HEAD (two dots), like v6.1..my-series")
    base, head = text.split("..")
    if not base:
        raise UserError(f"range {text!r}: name the base, like HEAD~3..HEAD")
    return base, head or "HEAD"


def commits(repo: str | Path, base: str, head: str) -> list[Commit]:
    """The commits of BASE..HEAD, oldest first (`git rev-list --reverse`), each with its tree
    and subject. BASE itself is not among them (resolve it for the series' first row)."""
    repo = Path(repo)
    b, h = resolve(repo, base), resolve(repo, head)
    done = _git(repo, "log", "--reverse", "--format=%H%x00%T%x00%s", f"{b.sha}..{h.sha}", "--", timeout=600)
    if done.failure:
        raise UserError(f"git log {base}..{head} in {repo}: {done.stderr.strip()[:200]}")
    out = []
    for line in done.stdout.splitlines():
        sha, tree, subject = line.split("\0", 2)
        out.append(Commit(repo, sha[:12], sha, tree, subject))
    return out


def holds(dest: Path) -> str | None:
    """The tree sha a directory made here holds, None when it holds none (or half of one)."""
    try:
        return json.loads((dest / MARKER).read_text())["tree"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _read_tree(commit: Commit, dest: Path, index: Path) -> None:
    """`git read-tree --reset -u TREE` with a private index and DEST as the work tree: a file
    whose index entry and content already match is not written again."""
    env = _env(GIT_DIR=str(_git_dir(commit.repo)), GIT_WORK_TREE=str(dest), GIT_INDEX_FILE=str(index))
    done = _git(dest, "read-tree", "--reset", "-u", commit.tree, timeout=GIT_TIMEOUT, env=env)
    if done.failure:
        raise UserError(f"cannot check out {commit.ref} ({commit.short}) of {commit.repo} into {dest}: "
                        f"{(done.stderr.strip().splitlines() or [done.failure])[-1]}")


def export(commit: Commit, dest: Path) -> Path:
    """DEST := the commit's tree, made once (under a lock, built beside and renamed into place)."""
    dest = Path(dest)
    if holds(dest) == commit.tree:
        return dest
    with locked(dest.with_name(dest.name + ".lock")):
        if holds(dest) == commit.tree:
            return dest
        tmp = dest.with_name(f"{dest.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        index = tmp.with_name(tmp.name + ".index")
        try:
            _read_tree(commit, tmp, index)
            (tmp / MARKER).write_text(json.dumps({"tree": commit.tree, "commit": commit.sha}))
            if dest.exists():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
        finally:
            index.unlink(missing_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def walk(commit: Commit, dest: Path) -> list[str]:
    """Move DEST, a checkout flagbench owns (made here on first use), to the commit's tree,
    writing only the files that differ; their paths are returned. The private index lives
    beside DEST (DEST.index). The caller holds a lock on DEST while it builds from it."""
    dest = Path(dest)
    index = dest.with_name(dest.name + ".index")
    before = holds(dest)
    if before == commit.tree:
        return []
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MARKER).unlink(missing_ok=True)    # half-walked until the marker is back
    if before is None:
        index.unlink(missing_ok=True)          # unknown content: read-tree rewrites every file
    _read_tree(commit, dest, index)
    changed = []
    if before is not None:
        done = _git(dest, "diff-tree", "-r", "--name-only", "--no-renames", before, commit.tree,
                    env=_env(GIT_DIR=str(_git_dir(commit.repo))), timeout=600)
        changed = done.stdout.splitlines() if not done.failure else []
    (dest / MARKER).write_text(json.dumps({"tree": commit.tree, "commit": commit.sha}))
    return changed
