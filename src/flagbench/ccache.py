"""ccache's remote storage, shared by every compile flagbench runs (C cells and Kbuild alike),
and the hit counts of one build read from ccache's stats log.

The remote comes from the experiment (`[cache] remote = "redis://host:6379"`) or from
FLAGBENCH_CCACHE_REMOTE, which wins (the machine knows its nearest server; an empty value
turns the remote off). It is handed to ccache as CCACHE_REMOTE_STORAGE, so ccache's own
syntax holds: `redis://[user:pass@]host[:port]`, `redis+unix:/path`, `http://...`,
`file:/dir`, with `|attribute=value` suffixes. A remote hit is also stored locally.

Per build, CCACHE_STATSLOG points at a file of its own: ccache appends one block per
compile (`# source` then counter names), so concurrent builds sharing one local cache
directory still get their own counts.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ENV = "FLAGBENCH_CCACHE_REMOTE"
SCHEMES = ("redis://", "redis+unix:", "http://", "https://", "file:")


def check_remote(url: str) -> str | None:
    """Why URL cannot be a ccache remote, or None."""
    if not url.startswith(SCHEMES):
        return f"{url!r} is not a ccache remote storage URL (one of {', '.join(SCHEMES)})"
    if any(c in url for c in "\n\0 "):
        return f"{url!r}: a remote URL has no spaces or control characters"
    return None


def remote(experiment_remote: str | None = None) -> str | None:
    """The remote every compile of this build uses: the environment's, else the experiment's."""
    value = os.environ.get(ENV)
    if value is None:
        return experiment_remote or None
    return value.strip() or None


def env(remote_url: str | None, stats_log: Path | None) -> dict[str, str]:
    """Environment additions for a ccache run."""
    out = {}
    if remote_url:
        out["CCACHE_REMOTE_STORAGE"] = remote_url
    if stats_log is not None:
        out["CCACHE_STATSLOG"] = str(stats_log)
    return out


@dataclass(frozen=True)
class Stats:
    """What ccache did for the compiles of one build."""
    compiles: int = 0          # cacheable compiles seen (hits + misses)
    local_hits: int = 0
    remote_hits: int = 0
    misses: int = 0            # compiled for real
    uncacheable: int = 0       # links, preprocessing only, unsupported options: ccache ran the compiler
    remote: str | None = None

    def as_dict(self) -> dict:
        return {"compiles": self.compiles, "local_hits": self.local_hits, "remote_hits": self.remote_hits,
                "misses": self.misses, "uncacheable": self.uncacheable, "remote": self.remote}

    def line(self) -> str:
        text = (f"ccache: {self.compiles} compiles, {self.local_hits} local hits, "
                f"{self.remote_hits} remote hits, {self.misses} misses")
        return text + (f" (remote {shown_remote(self.remote)})" if self.remote else " (no remote)")


def shown_remote(url: str | None) -> str:
    """A remote as printed: without a password."""
    if not url or "@" not in url.split("|")[0]:
        return url or ""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://***@{rest.split('@', 1)[1]}"


_HIT = ("direct_cache_hit", "preprocessed_cache_hit")


def read_stats(log: Path, remote_url: str | None) -> Stats:
    """Count a stats log's compiles. One block per ccache run: a hit served from the local
    directory has local_storage_hit, one fetched from the remote has remote_storage_hit."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return Stats(remote=remote_url)
    blocks: list[Counter] = []
    for line in text.splitlines():
        if line.startswith("#"):
            blocks.append(Counter())
        elif line.strip() and blocks:
            blocks[-1][line.strip()] += 1
    local = remote_hits = misses = uncacheable = 0
    for b in blocks:
        if any(b[h] for h in _HIT):
            if b["local_storage_hit"]:
                local += 1
            elif b["remote_storage_hit"]:
                remote_hits += 1
            else:
                local += 1
        elif b["cache_miss"]:
            misses += 1
        else:
            uncacheable += 1
    return Stats(local + remote_hits + misses, local, remote_hits, misses, uncacheable, remote_url)
