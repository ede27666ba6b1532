"""distcc: compiles of C cells and Kbuild sent to other machines' distccd, behind ccache.

Hosts come from the experiment (`[build] distcc = ["host/4", "host:3632/2"]`) or from
FLAGBENCH_DISTCC_HOSTS (space-separated, distcc's own syntax), which wins; an empty value
turns distcc off. With ccache in front (Kbuild always, C cells with a ccache remote) ccache
runs `distcc COMPILER` for its misses (CCACHE_PREFIX=distcc); otherwise flagbench runs
`distcc COMPILER` itself. Kbuild keeps `CC="ccache gcc"` on make's command line (since 5.2
it must be there: distcc#358).

What distcc gets wrong without a word, checked before anything compiles, once per run
(per compiler, hosts in parallel; a host gets CONNECT_TIMEOUT to take the connection and
PROBE_TIMEOUT for the whole probe, retries included, and one that does not answer is dropped
for the rest of the run, every compiler, without being asked again):
- a host whose compiler is another version (or another build, or a wrapper adding flags)
  makes other objects: one probe file is compiled there (DISTCC_FALLBACK=0: really there)
  and here, and the two objects must be the same bytes; a host that differs is dropped,
  and so is one that does not answer (one line each; with no host left, compiles stay here);
- `-march=native` is compiled locally by distcc (distcc#331), and any other `=native` flag
  would be compiled for the remote's CPU: compiles with such flags are not sent at all;
- pump mode chokes on kernel headers (distcc#104): never used (",cpp" hosts are refused).

Where compiles went: every distcc client appends "compile FILE on HOST completed ok" to
DISTCC_LOG (distcc's own accounting, on at its default level, nothing to scrape from the
servers); flagbench points it at a file of its own per build and counts the lines.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from flagbench import procs
from flagbench.errors import UserError

ENV = "FLAGBENCH_DISTCC_HOSTS"
DEFAULT_PORT = 3632
CONNECT_TIMEOUT = 3.0
PROBE_TIMEOUT = 30.0
PROBE_TRIES = 3          # a dropped connection is tried again, this often at most, within PROBE_TIMEOUT
LOCAL = "localhost"          # distcc's name for "compile here"
# [user@]host[:port][/limit][,lzo]; "localhost[/N]" is distcc's own local slots
_ENTRY = re.compile(r"(?:(?P<user>[A-Za-z0-9_.-]*)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_][A-Za-z0-9_.-]*)"
                    r"(?::(?P<port>\d{1,5}))?(?:/(?P<limit>\d{1,4}))?(?P<opts>(?:,[a-z]+)*)")
# "(null)": no source file, nothing distcc could send (Kbuild's cc-option probes of /dev/null, links)
_DONE = re.compile(r"^distcc\[\d+\] compile (?!\(null\) )\S+ on (\S+) completed ok\s*$", re.M)
_FELL_BACK = re.compile(r"^distcc\[\d+\] Warning: failed to distribute \S+ to (\S+), running locally", re.M)
_NATIVE = re.compile(r"^-m(?:arch|cpu|tune)=native$")
# Optimised, inlined code and the compiler's .comment: another version or a flag shows in the bytes.
PROBE_SOURCE = ("static int fb_sq(int x) { return x * x; }\n"
                "int fb_distcc_probe(const int *a, int n);\n"
                "int fb_distcc_probe(const int *a, int n)\n"
                "{\n\tint s = 0;\n\tfor (int i = 0; i < n; i++)\n\t\ts += fb_sq(a[i]) ^ i;\n\treturn s;\n}\n")

Say = Callable[[str], None]


def check_host(entry: str) -> str | None:
    """Why ENTRY cannot be a distcc host, or None."""
    m = _ENTRY.fullmatch(entry)
    if not m:
        return f"distcc host {entry!r}: not HOST, HOST/LIMIT, HOST:PORT/LIMIT or [USER]@HOST/LIMIT"
    if "cpp" in m.group("opts").split(","):
        return (f"distcc host {entry!r}: pump mode (,cpp) is not used: it fails on kernel headers "
                "(distcc#104); drop ,cpp")
    if set(m.group("opts").split(",")) - {"", "lzo"}:
        return f"distcc host {entry!r}: the only option flagbench passes on is ,lzo"
    if m.group("port") and not 0 < int(m.group("port")) < 65536:
        return f"distcc host {entry!r}: port out of range"
    if m.group("limit") and int(m.group("limit")) == 0:
        return f"distcc host {entry!r}: a slot count of 0 sends it nothing: give /1 or more, or leave the host out"
    return None


def configured(experiment_hosts: Sequence[str] = ()) -> tuple[str, ...]:
    """The hosts of this run: FLAGBENCH_DISTCC_HOSTS when set (empty: none), else the experiment's."""
    value = os.environ.get(ENV)
    if value is None:
        return tuple(experiment_hosts)
    hosts = tuple(value.split())
    for h in hosts:
        problem = check_host(h)
        if problem:
            raise UserError(f"{ENV}: {problem}")
    return hosts


def shown(entry: str) -> str:
    """A host as counts and messages name it: without its limit and options."""
    return entry.split(",")[0].split("/")[0]


def native_flag(flags: Sequence[str]) -> str | None:
    """The first flag that names this machine's CPU (distcc would compile it here, or worse)."""
    return next((f for f in flags if _NATIVE.match(f)), None)


# -- where compiles went ------------------------------------------------------------------------
@dataclass(frozen=True)
class Counts:
    """Compiles distcc ran for one build, by host (LOCAL: on this machine)."""
    by_host: dict[str, int] = field(default_factory=dict)
    fell_back: int = 0          # sent, failed there, compiled here instead
    hosts: tuple[str, ...] = ()

    @property
    def remote(self) -> int:
        return sum(n for h, n in self.by_host.items() if h != LOCAL)

    @property
    def total(self) -> int:
        return sum(self.by_host.values())

    def as_dict(self) -> dict:
        return {"compiles": self.total, "remote": self.remote, "local": self.by_host.get(LOCAL, 0),
                "by_host": dict(self.by_host), "fell_back": self.fell_back, "hosts": list(self.hosts)}

    def line(self) -> str:
        if not self.total:
            return f"distcc: no compile ran through distcc (hosts {' '.join(map(shown, self.hosts))})"
        share = 100.0 * self.remote / self.total
        each = ", ".join(f"{h} {n}" for h, n in sorted(self.by_host.items()) if h != LOCAL)
        text = (f"distcc: {self.total} compiles, {self.remote} remote ({share:.0f}%"
                + (f": {each}" if each else "") + f"), {self.by_host.get(LOCAL, 0)} here")
        return text + (f", {self.fell_back} fell back to here" if self.fell_back else "")


def read_counts(log: Path, hosts: Sequence[str] = ()) -> Counts:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return Counts(hosts=tuple(hosts))
    by_host = Counter(LOCAL if h == LOCAL else shown(h) for h in _DONE.findall(text))
    return Counts(dict(by_host), len(_FELL_BACK.findall(text)), tuple(hosts))


def env(hosts: Sequence[str], log: Path) -> dict[str, str]:
    """distcc's environment for compiles sent to HOSTS (counted in LOG)."""
    return {"DISTCC_HOSTS": " ".join(hosts), "DISTCC_LOG": str(log)}


def wrap(argv: Sequence[str], extra_env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """A compile command sent through distcc: ccache's prefix when ccache runs it, else distcc first."""
    if argv and os.path.basename(argv[0]) == "ccache":
        return list(argv), {**extra_env, "CCACHE_PREFIX": "distcc"}
    return ["distcc", *argv], dict(extra_env)


def cell_envs(hosts: Sequence[str], cells: Sequence[tuple[str, str, Sequence[str], Sequence[str]]],
              log_dir: Path, say: Say, *, through_ccache: bool = False) -> dict[str, tuple[tuple[str, str], ...]]:
    """Per cell (key, variant, flags, compiler argv), distcc's environment with a log of its own
    (named o-PID-* in LOG_DIR) for the hosts that make this machine's bytes with its compiler.
    A cell whose flags name this machine's CPU stays here (see native_flag)."""
    out, warned = {}, set()
    for key, variant, flags, argv in cells:
        native = native_flag(flags)
        if native:
            if (variant, native) not in warned:
                say(f"variant {variant}: {native} compiles here only, not through distcc (distcc#331)")
                warned.add((variant, native))
            continue
        kept = hosts_for(hosts, [argv], say, through_ccache=through_ccache)
        if kept:
            fd, log = tempfile.mkstemp(prefix=f"o-{os.getpid()}-", suffix=".distcc-log", dir=log_dir)
            os.close(fd)
            out[key] = tuple(sorted(env(kept, Path(log)).items()))
    return out


# -- the check before a run ----------------------------------------------------------------------
_DECIDED: dict[tuple, tuple[str, ...]] = {}
_SILENT: dict[str, str] = {}    # host -> why: it did not answer once this run, it is not asked again
_LOCK = threading.Lock()           # held while a decision is made (the probes' threads run under it)
_SILENT_LOCK = threading.Lock()


def hosts_for(hosts: Sequence[str], compilers: Sequence[Sequence[str]], say: Say, *,
              through_ccache: bool = False) -> tuple[str, ...]:
    """The HOSTS whose compiles of every one of COMPILERS (argv prefixes) are the bytes this
    machine makes; each host dropped is said once, with why. Decided once per process.
    THROUGH_CCACHE: ccache hands distcc the compiler's path (/usr/bin/gcc), which the host runs
    as named, where a bare `gcc` is looked up in the host's PATH: the probe sends what the build will."""
    if not hosts:
        return ()
    if shutil.which("distcc") is None:
        raise UserError("distcc hosts are configured but distcc is not installed: apt-get install distcc")
    kept = tuple(hosts)
    sent = [(shutil.which(a[0]) or a[0], *a[1:]) if through_ccache else a for a in compilers]
    for argv in dict.fromkeys(tuple(a) for a in sent):
        with _LOCK:
            key = (tuple(hosts), argv)
            if key not in _DECIDED:
                _DECIDED[key] = _decide(tuple(hosts), argv, say)
        kept = tuple(h for h in kept if h in _DECIDED[key])
    return kept


def _decide(hosts: tuple[str, ...], argv: tuple[str, ...], say: Say) -> tuple[str, ...]:
    with tempfile.TemporaryDirectory(prefix="flagbench-distcc-") as tmp:
        work = Path(tmp)
        (work / "probe.c").write_text(PROBE_SOURCE)
        here = _compile(argv, work, "here.o", None)
        if isinstance(here, str):   # the compiler fails here: the build will say so itself
            return hosts
        with ThreadPoolExecutor(max_workers=len(hosts)) as pool:
            verdicts = list(pool.map(lambda i: _check_one(hosts[i], i, argv, work, here), range(len(hosts))))
    for host, why in zip(hosts, verdicts):
        if why:
            say(f"distcc host {shown(host)} dropped: {why}")
    kept = tuple(h for h, why in zip(hosts, verdicts) if not why)
    if not kept:
        say(f"no distcc host left for {' '.join(argv)}: its compiles run here")
    return kept


def _check_one(host: str, index: int, argv: tuple[str, ...], work: Path, here: bytes) -> str | None:
    """None when HOST compiles the probe with ARGV to HERE's bytes, else why not."""
    if shown(host) == LOCAL:
        return None
    with _SILENT_LOCK:
        if host in _SILENT:
            return _SILENT[host]
    why = _reach(host)
    if why:
        return _silent(host, why)
    deadline = time.monotonic() + PROBE_TIMEOUT
    there, log, attempt = f"no time left of {PROBE_TIMEOUT:g} s", work / f"{index}.log", 0
    for attempt in range(PROBE_TRIES):   # a dropped connection under load is not a verdict on the host
        left = deadline - time.monotonic()
        if left < 1:
            break
        log = work / f"{index}.{attempt}.log"
        began = time.monotonic()
        there = _compile(("distcc", *argv), work, f"{index}.o",
                         {"DISTCC_HOSTS": host, "DISTCC_FALLBACK": "0", "DISTCC_BACKOFF_PERIOD": "0",
                          "DISTCC_IO_TIMEOUT": str(max(1, int(left))), "DISTCC_LOG": str(log)}, timeout=left)
        if not isinstance(there, str) or time.monotonic() - began > CONNECT_TIMEOUT:
            break                # bytes, or a host that kept us waiting: asking again waits again
    if isinstance(there, str):   # no answer within the probe's time: not asked again this run
        return _silent(host, f"cannot compile with {argv[0]} there within {PROBE_TIMEOUT:.0f} s, "
                             f"{attempt + 1} tr{'y' if attempt == 0 else 'ies'} ({_distcc_error(log) or there})")
    if there == here:
        return None
    ours, theirs = _comment(here), _comment(there)
    if ours != theirs:
        return f"its {argv[0]} is another version ({theirs or 'unknown'}; here {ours or 'unknown'})"
    return f"its {argv[0]} makes other objects than this machine's (same version, other flags or build)"


def _reach(host: str) -> str | None:
    """Why HOST's distccd port does not take a connection within CONNECT_TIMEOUT, or None (ssh
    hosts, [user]@host, start distccd by ssh: the probe tells)."""
    m = _ENTRY.fullmatch(host)
    if not m or m.group("user") is not None:
        return None
    port = int(m.group("port") or DEFAULT_PORT)
    try:
        socket.create_connection((m.group("host").strip("[]"), port), timeout=CONNECT_TIMEOUT).close()
    except OSError as e:
        return f"does not answer on port {port} ({e.strerror or e})"
    return None


def _silent(host: str, why: str) -> str:
    with _SILENT_LOCK:
        _SILENT.setdefault(host, why)
    return why


def _compile(argv: Sequence[str], work: Path, out: str, extra: dict | None,
             timeout: float | None = None) -> bytes | str:
    """The probe's object bytes, or why there are none."""
    run_env = {**os.environ, "LC_ALL": "C", **(extra or {})}
    timeout = PROBE_TIMEOUT + 5 if timeout is None else timeout
    try:
        done = procs.run([*argv, "-O2", "-c", "probe.c", "-o", out], timeout=timeout, cwd=work, env=run_env)
    except OSError as e:
        return f"{argv[0]}: {e.strerror or e}"
    if done.timed_out:
        return f"no answer within {timeout:.0f} s"
    if done.returncode:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        return lines[0].strip() if lines else f"exit status {done.returncode}"
    try:
        return (work / out).read_bytes()
    except OSError as e:
        return str(e)


def _distcc_error(log: Path) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        if "ERROR:" in line or "Warning:" in line:
            return line.split("] ", 1)[-1].strip()
    return ""


def _comment(obj: bytes) -> str:
    """The compiler's own words in the object's .comment ("GCC: (Debian 12.2.0-14) 12.2.0")."""
    m = re.search(rb"(?:GCC: |clang version )[\x20-\x7e]+", obj)
    return m.group(0).decode() if m else ""
