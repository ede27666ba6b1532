"""ccache's remote storage, shared by every compile flagbench runs (C cells and Kbuild alike),
and the hit counts of one build read from ccache's stats log.

The remote comes from the experiment (`[cache] remote = "redis://host:6379"`) or from
FLAGBENCH_CCACHE_REMOTE, which wins (the machine knows its nearest server; an empty value
turns the remote off). It is handed to ccache as CCACHE_REMOTE_STORAGE, so ccache's own
syntax holds: `redis://[user:pass@]host[:port]`, `redis+unix:/path`, `http://...`,
`file:/dir`, with `|attribute=value` suffixes. A remote hit is also stored locally.

Both are checked before anything builds (a malformed URL is bad input at its line, or naming
the variable), and the server is asked once per run, within PROBE_S seconds: one that refuses,
wants another password or never answers is said in one line, and the build uses the local
cache only (ccache would otherwise wait on it for every object, silently).

Per build, CCACHE_STATSLOG points at a file of its own: ccache appends one block per
compile (`# source` then counter names), so concurrent builds sharing one local cache
directory still get their own counts.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from flagbench.errors import UserError

ENV = "FLAGBENCH_CCACHE_REMOTE"
SCHEMES = ("redis://", "redis+unix:", "http://", "https://", "file:")


def check_remote(url: str) -> str | None:
    """Why URL cannot be a ccache remote, or None: the scheme, and a host and port (redis, http)
    or a path (redis+unix, file) that ccache can use.

    >>> check_remote("redis://127.0.0.1:99999")
    "'redis://127.0.0.1:99999': port 99999 is not 1..65535"
    >>> check_remote("redis://:secret@cache.lab:6379|connect-timeout=50") is None
    True
    """
    if not isinstance(url, str) or not url.startswith(SCHEMES):
        return f"{url!r} is not a ccache remote storage URL (one of {', '.join(SCHEMES)})"
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        return f"{url!r}: a remote URL has no spaces or control characters"
    base = url.split("|", 1)[0]
    if base.startswith(("redis+unix:", "file:")):
        path = base.split(":", 1)[1]
        return None if path.strip("/") else f"{url!r}: no path after {base.split(':', 1)[0]}:"
    parts = urlsplit(base)
    port = parts.netloc.rsplit("@", 1)[-1].rsplit("]", 1)[-1].partition(":")[2]
    if not parts.hostname:
        return f"{url!r}: no host (redis://[[user:]password@]host[:port], http://host[:port]/path)"
    if port and (not port.isdigit() or not 1 <= int(port) <= 65535):
        return f"{url!r}: port {port} is not 1..65535"
    return None


def remote(experiment_remote: str | None = None) -> str | None:
    """The remote every compile of this build uses: the environment's (checked: bad input is
    one line naming the variable), else the experiment's (checked at its line by spec.py)."""
    value = os.environ.get(ENV)
    if value is None:
        return experiment_remote or None
    value = value.strip()
    problem = check_remote(value) if value else None
    if problem:
        raise UserError(f"{ENV}: {problem}")
    return value or None


# -- is it there? once per run, bounded ---------------------------------------------------------
PROBE_S = 3.0       # the whole probe: ccache itself would wait up to 10 s per compile and object
_probed: dict[str, str | None] = {}


def usable(url: str | None, say=None) -> str | None:
    """URL when its server answers now (a redis PING, with the URL's password; an HTTP reply;
    a directory), else None: then one line says why (refused, wrong password, accepts but never
    answers) and every compile uses the local cache only. Asked once per URL and process."""
    if not url:
        return None
    if url not in _probed:
        why = _probe(url.split("|", 1)[0])
        _probed[url] = why
        if why:
            line = f"flagbench: shared cache {shown_remote(url)} cannot be used: {why}; building from the local cache only"
            (say or (lambda text: print(text, file=sys.stderr, flush=True)))(line)
    return None if _probed[url] else url


def _probe(url: str) -> str | None:
    """Why the remote at URL (no |attributes) cannot be used now, or None."""
    if url.startswith("file:"):
        path = Path(url.split(":", 1)[1].removeprefix("//"))
        return None if os.access(path if path.exists() else path.parent, os.W_OK) else f"{path} is not writable"
    deadline = time.monotonic() + PROBE_S
    try:
        if url.startswith("redis+unix:"):
            sock = socket.socket(socket.AF_UNIX)
            sock.settimeout(PROBE_S)
            sock.connect(url.split(":", 1)[1].removeprefix("//"))
        else:
            parts = urlsplit(url)
            default = {"redis": 6379, "http": 80, "https": 443}[parts.scheme]
            sock = socket.create_connection((parts.hostname, parts.port or default), timeout=PROBE_S)
    except ConnectionRefusedError:
        return "connection refused"
    except socket.timeout:
        return f"no connection within {PROBE_S:g} s"
    except OSError as e:
        return e.strerror or str(e)
    with sock:
        try:
            return _ask(sock, url, deadline)
        except socket.timeout:
            return f"it accepts connections but does not answer within {PROBE_S:g} s"
        except OSError as e:
            return f"the connection failed: {e.strerror or e}"


def _ask(sock: socket.socket, url: str, deadline: float) -> str | None:
    """Speak to the server: redis AUTH (when the URL has a password) and PING; HTTP HEAD."""
    if url.startswith("https:"):
        return None                      # the TLS handshake is ccache's: a connection is all we check
    if url.startswith("http:"):
        parts = urlsplit(url)
        sock.sendall(f"HEAD {parts.path or '/'} HTTP/1.0\r\nHost: {parts.hostname}\r\n\r\n".encode())
        reply = _line(sock, deadline)
        return None if reply.startswith("HTTP/") else f"no HTTP answer ({reply[:40]!r})"
    parts = urlsplit(url) if url.startswith("redis:") else None
    user, password = (parts.username, parts.password) if parts else (None, None)
    if password is None and user:         # redis://PASSWORD@host
        user, password = None, user
    if password:
        words = ["AUTH", *([unquote(user)] if user else []), unquote(password)]
        sock.sendall((f"*{len(words)}\r\n" + "".join(f"${len(w.encode())}\r\n{w}\r\n" for w in words)).encode())
        reply = _line(sock, deadline)
        if not reply.startswith("+OK"):
            return f"the password is not accepted ({reply[:60]})"
    sock.sendall(b"*1\r\n$4\r\nPING\r\n")
    reply = _line(sock, deadline)
    if reply.startswith("+PONG"):
        return None
    if reply.startswith("-NOAUTH"):
        return "it wants a password (redis://[user:]password@host:port)"
    return f"no redis answer ({reply[:60]!r})"


def _line(sock: socket.socket, deadline: float) -> str:
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout()
        sock.settimeout(left)
        chunk = sock.recv(512)
        if not chunk:
            break
        data += chunk
    return data.decode(errors="replace").strip()


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
