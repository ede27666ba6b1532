"""Build the project's qemu TCG plugin (plugin/insncount.c) on demand.

The shared object is cached by the hash of its source and the host compiler's
version, so it is built once per machine; the build goes to a temporary name
and is renamed into place, so parallel test workers never see half a file.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from flagbench import procs
from flagbench.errors import UserError
from flagbench.toolchains import tool_version

PLUGIN_SOURCE = Path(__file__).resolve().parent.parent / "plugin" / "insncount.c"
HOST_CC = "gcc"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flagbench"


def plugin_path() -> Path:
    """The built plugin, compiling it first when the cache has none for this source."""
    if shutil.which(HOST_CC) is None:
        raise UserError("the qemu instruction-count plugin needs a host C compiler: apt-get install gcc")
    source = PLUGIN_SOURCE.read_bytes()
    key = hashlib.sha256(source + tool_version(HOST_CC).encode()).hexdigest()[:16]
    out = cache_dir() / f"insncount-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".insncount-", suffix=".so", dir=out.parent)
    os.close(fd)
    argv = [HOST_CC, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall",
            "-o", tmp, str(PLUGIN_SOURCE)]
    proc = procs.run(argv, timeout=300)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise UserError(f"building the qemu plugin failed: {proc.failure}: {proc.stderr.strip()}")
    os.replace(tmp, out)
    return out
