"""Variants that name a git commit: `ref = "v6.1"`, `"HEAD~2"`, a sha.

    [kernel]
    source = "../linux"            # a kernel tree that is a git repository (its top)

    [variants]
    base   = { ref = "v6.1" }
    series = { ref = "my-series" }

In a kernel experiment the ref is a commit of the [kernel] source's repository: the build
walks a checkout flagbench owns in its cache to that commit (kbuild/source.py). In a C
experiment it is a commit of the repository holding the sources: they are read from the
commit's tree, exported once into <cache>/git/trees/<tree sha> (hard links into one store of
blobs, <cache>/git/blobs: what did not change between commits is stored once). Either way the user's
checkout, index, branches and stash are never touched (vcs.py), and a ref is resolved once,
when the experiment is loaded; one that names no commit is "FILE:LINE: ...", exit 2.
"""
from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from flagbench import vcs, vcs_export


def resolve(checker, exp, kernel=None):
    """EXP with each variant's ref resolved (Variant.commit) and, for C, its sources at it;
    the experiment's hash then names the commits too. KERNEL: its [kernel] table, whose source
    the refs name commits of (None: C sources). Errors go through spec's checker."""
    variants, digest = [], hashlib.sha256(exp.hash.encode())
    for v in exp.variants:
        if v.ref is None:
            variants.append(v)
            continue
        where = ("variants", v.name, "ref")
        repo = _repo(checker, exp, kernel, v, where)
        try:
            commit = vcs.resolve(repo, v.ref)
        except vcs.UnknownRef as e:
            checker.fail(where, f"variant {v.name!r}: {e}")
        digest.update(f"{v.name}\0{commit.sha}\0{commit.tree}\0".encode())
        sources = v.sources
        if kernel is None:
            sources = sources_at(commit, v.sources or exp.sources, lambda what: checker.fail(where, what))
        variants.append(replace(v, commit=commit, sources=sources))
    return replace(exp, variants=tuple(variants), hash=digest.hexdigest())


def sources_repository(exp) -> Path | None:
    """The repository that holds a C experiment's sources (None when there is none)."""
    sources = exp.sources or next((v.sources for v in exp.variants if v.sources and v.commit is None), ())
    return vcs.repo_root(sources[0]) if sources else None


def tree_repository(source: str) -> Path | None:
    """The repository of a `[kernel] source` (None for a Debian tree, or a tree outside git)."""
    return None if source.startswith("debian:") else vcs.repo_root(source)


def _repo(checker, exp, kernel, v, where: tuple) -> Path:
    if kernel is not None:
        source = kernel.source
        if source.startswith("debian:"):
            checker.fail(where, f"variant {v.name!r}: ref needs [kernel] source = PATH, a kernel tree that is "
                         f"a git repository (not {source})")
        repo = vcs.repo_root(source)
        if repo is None or repo != Path(source).resolve():
            checker.fail(where, f"variant {v.name!r}: ref needs the kernel source {source} to be the top of "
                         "a git repository" + (f" (it is inside {repo})" if repo else ""))
        if kernel.changes(v.name).patches:
            checker.fail(where, f"variant {v.name!r}: ref with patches: commit the patches on a branch "
                         "and name that as the ref")
        return repo
    sources = v.sources or exp.sources
    repo = vcs.repo_root(sources[0]) if sources else None
    if repo is None:
        checker.fail(where, f"variant {v.name!r}: ref reads the sources at a commit, and "
                     f"{sources[0] if sources else 'the experiment'} is not in a git repository")
    return repo


def export_dir(commit: vcs.Commit) -> Path:
    from flagbench.cache import cache_dir
    return cache_dir() / "git" / "trees" / commit.tree


def blob_store() -> Path:
    """The files of every export, one per blob (exports hard-link them: a file that no commit
    changed takes its space once, however many commits are exported)."""
    from flagbench.cache import cache_dir
    return cache_dir() / "git" / "blobs"


def sources_at(commit: vcs.Commit, sources, fail) -> tuple[Path, ...]:
    """SOURCES (paths in the user's work tree) as the commit has them: in its tree, exported
    once into the cache. fail(what) reports a source the commit does not have."""
    tree = vcs_export.export(commit, export_dir(commit), blob_store())
    out = []
    for src in sources:
        try:
            rel = Path(src).resolve().relative_to(commit.repo)
        except ValueError:
            fail(f"source {src} is outside the repository {commit.repo} the ref is read from")
        if not (tree / rel).is_file():
            fail(f"source {rel} does not exist at {commit.ref} ({commit.short})")
        out.append(tree / rel)
    return tuple(out)
