"""What a watched branch holds: its tip and its first-parent chain, read from the user's
repository with read-only plumbing (vcs.py's environment: no index refresh, no lock taken).

    tip(repo, branch) -> sha | None          the branch's commit now (None: no such branch)
    chain(repo, tip, since) -> [Commit]      first-parent commits of TIP after SINCE, oldest first
    parent(repo, sha) -> sha | None          the first parent
    contains(repo, old, new) -> bool         OLD is an ancestor of NEW (not a force-push)
"""
from __future__ import annotations

from pathlib import Path

from flagbench import vcs
from flagbench.errors import UserError


def _git(repo: Path, *args: str, timeout: float = 600):
    return vcs._git(Path(repo), *args, timeout=timeout)


def tip(repo: Path, branch: str) -> str | None:
    """The commit BRANCH names now: refs/heads/BRANCH first, else any ref git resolves."""
    for ref in (f"refs/heads/{branch}", branch):
        if ref.startswith("-") or any(c.isspace() for c in ref):
            return None
        done = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if not done.failure and done.stdout.strip():
            return done.stdout.strip()
    return None


def chain(repo: Path, tip_sha: str, since: str | None, limit: int = 100_000) -> list[vcs.Commit]:
    """First-parent commits of TIP_SHA not reachable from SINCE (all when None), oldest first,
    at most LIMIT of the newest when SINCE is None."""
    args = ["log", "--first-parent", "--format=%H%x00%T%x00%P%x00%s", tip_sha]
    if since:
        args.append(f"^{since}")
    else:
        args.append(f"--max-count={limit}")
    done = _git(repo, *args, "--")
    if done.failure:
        raise UserError(f"git log {tip_sha[:12]} in {repo}: {done.stderr.strip()[:200]}")
    out = []
    for line in reversed(done.stdout.splitlines()):
        sha, tree, parents, subject = line.split("\0", 3)
        out.append(vcs.Commit(Path(repo), sha[:12], sha, tree, subject))
        _PARENTS[sha] = tuple(parents.split())
    return out


_PARENTS: dict[str, tuple[str, ...]] = {}   # what chain() read: a commit's parents never change


def parent(repo: Path, sha: str) -> str | None:
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{sha}^1")
    return done.stdout.strip() or None if not done.failure else None


def parents(repo: Path, sha: str) -> tuple[str, ...]:
    """The commit's parents, first parent first."""
    if sha in _PARENTS:
        return _PARENTS[sha]
    done = _git(repo, "rev-list", "--parents", "-n", "1", sha, "--")
    return tuple(done.stdout.split()[1:]) if not done.failure else ()


def describe(repo: Path, sha: str) -> vcs.Commit:
    return vcs._describe(Path(repo), sha[:12], sha)


def contains(repo: Path, old: str, new: str) -> bool:
    """OLD is reachable from NEW: the branch moved forward (else it was rewritten)."""
    return not _git(repo, "merge-base", "--is-ancestor", old, new).failure


def author(repo: Path, sha: str) -> tuple[str, str]:
    """(author "Name <mail>", date) of a commit, for the report's header."""
    done = _git(repo, "log", "-1", "--format=%an <%ae>%x00%aD", sha, "--")
    name, _, date = done.stdout.strip().partition("\0")
    return name, date
