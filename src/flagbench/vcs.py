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
    export(commit, dest, store) -> Path     DEST holds the commit's tree (made once, atomically;
                                            a DEST that holds it already is left as it is); its
                                            files are hard links into STORE, one file per blob,
                                            so exports of many commits share what did not change
    walk(commit, dest) -> list[str]         DEST (a checkout flagbench owns) moved to the commit:
                                            only files that differ are written (their mtime
                                            changes, the rest keep theirs: make rebuilds just
                                            what changed, as ktest.pl's walk does). The paths
                                            that changed are returned.

A Commit's `tree` is the content's name: two refs with one tree are one build (key cells by it).

What is flagbench's own, not the user's: the user's sparse-checkout settings do not narrow
an export or a walk (core.sparseCheckout is off for our commands); a submodule's files are
read from the submodule's own repository; the locks and temporaries a killed flagbench left
(a walk's `<checkout>.index.lock`, an export's `<tree>.tmp-PID`) are removed by the next run
that takes the same file lock, which no live flagbench can hold at once.
"""
from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from flagbench import procs
from flagbench.errors import UserError

GIT_TIMEOUT = 1800          # a checkout of a kernel tree writes ~75,000 files
MARKER = ".flagbench-tree"  # in an export: the tree sha it holds (written last)
EXPORT_VERSION = 2          # 2: never narrowed by sparse checkout, submodules filled in
# Our commands see the whole tree whatever the user's sparse-checkout settings say.
_WHOLE = ("-c", "core.sparseCheckout=false", "-c", "core.sparseCheckoutCone=false", "-c", "index.sparse=false")
# The caller's git environment would redirect our commands to another repository or index.
_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
                 "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")


class UnknownRef(UserError):
    """A ref that names no commit of the repository (spec adds the experiment's FILE:LINE)."""


class UnsafeRepo(UserError):
    """A repository git itself refuses to read: owned by another user (safe.directory)."""


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
    _check_safe(done, where)
    if done.failure or not done.stdout.strip():
        return None
    return Path(done.stdout.strip()).resolve()


def _check_safe(done: procs.Done, where: Path) -> None:
    """UnsafeRepo when git refused the repository for its owner (it is one, just not trusted)."""
    if done.failure and "dubious ownership" in done.stderr:
        at = next((ln.split(" at ", 1)[1].strip("'") for ln in done.stderr.splitlines() if "dubious" in ln), where)
        raise UnsafeRepo(f"{at}: git refuses this repository: it is owned by another user (git's safe.directory; "
                         f"to trust it: git config --global --add safe.directory {at})")


def _git_dir(repo: Path) -> Path:
    done = _git(repo, "rev-parse", "--absolute-git-dir")
    _check_safe(done, repo)
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
    message = ref.startswith(":/")     # `:/text`: the youngest commit whose message matches text
    if not ref or ref.startswith("-") or any(c in "\0\n\r" or (c.isspace() and not message) for c in ref):
        raise UnknownRef(f"ref {ref!r}: not a git revision (a tag, a branch, HEAD~2, a sha, :/text)")
    if repo_root(repo) is None and _git(repo, "rev-parse", "--is-bare-repository").stdout.strip() != "true":
        raise UnknownRef(f"ref {ref!r}: {repo} is not a git repository")
    # after :/ everything is the pattern: a ^{commit} there would be searched for (it names a commit anyway)
    done = _git(repo, "rev-parse", "--verify", "--quiet", ref if message else f"{ref}^{{commit}}")
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


def holds(dest: Path, version: int | None = None) -> str | None:
    """The tree sha a directory made here holds, None when it holds none (or half of one, or,
    given VERSION, one made by an older export)."""
    try:
        marker = json.loads((dest / MARKER).read_text())
        if version is not None and marker.get("v") != version:
            return None
        return marker["tree"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


ORIGIN = "flagbench-origin"


def origin(repo: Path) -> Path:
    """The repository a clone flagbench made of it reads its objects from (mail/apply.py writes
    its path into the clone's .git/flagbench-origin), else REPO itself. A kernel commit of such a
    clone is walked into the origin's checkout and O= directory: a series from mail builds only
    what its patches change from the origin's commits already built, and one tree is one build."""
    try:
        named = (Path(repo) / ".git" / ORIGIN).read_text().strip()
    except OSError:
        return Path(repo)
    return Path(named) if named and Path(named).is_absolute() else Path(repo)


def _read_tree(repo: Path, tree: str, dest: Path, index: Path, what: str) -> None:
    """`git read-tree --reset -u TREE` with a private index and DEST as the work tree: a file
    whose index entry and content already match is not written again. A lock a killed
    flagbench left on the index is removed first (the caller holds DEST's file lock)."""
    _recover_lock(index)
    env = _env(GIT_DIR=str(_git_dir(repo)), GIT_WORK_TREE=str(dest), GIT_INDEX_FILE=str(index))
    procs.record_owner(index.with_name(index.name + ".owner"))
    done = _git(dest, *_WHOLE, "read-tree", "--reset", "-u", tree, timeout=GIT_TIMEOUT, env=env)
    if done.failure:   # git's "fatal:" line names the file; its hints come after it
        lines = done.stderr.strip().splitlines() or [done.failure]
        raise UserError(f"cannot check out {what} of {repo} into {dest}: "
                        f"{next((ln for ln in lines if ln.startswith('fatal:')), lines[-1])}")


def _recover_lock(index: Path) -> None:
    """INDEX.lock, left by a flagbench killed during read-tree, removed. A live flagbench cannot
    hold it (it would hold the file lock our caller holds); one that does is named, with its pid."""
    lock = index.with_name(index.name + ".lock")
    if not lock.exists():
        return
    try:
        owner = index.with_name(index.name + ".owner").read_text().strip()
    except OSError:
        owner = ""
    if owner and owner != procs._token() and procs._owner_alive(owner):
        raise UserError(f"{lock} is held by flagbench pid {int(owner[:8], 16)}, still running: "
                        "wait for it, or end it")
    lock.unlink(missing_ok=True)


def changed_paths(repo: Path, a: str, b: str) -> list[str] | None:
    """The paths whose content differs between trees (or commits) A and B of REPO; None when git
    cannot say (an object it does not have)."""
    done = _git(Path(repo), "diff-tree", "-r", "--name-only", "--no-renames", a, b,
                env=_env(GIT_DIR=str(_git_dir(Path(repo)))), timeout=600)
    return None if done.failure else done.stdout.splitlines()


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
    _read_tree(commit.repo, commit.tree, dest, index, f"{commit.ref} ({commit.short})")
    changed = (changed_paths(commit.repo, before, commit.tree) or []) if before is not None else []
    (dest / MARKER).write_text(json.dumps({"tree": commit.tree, "commit": commit.sha}))
    return changed
