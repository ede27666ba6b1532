"""Build flagbench's qemu TCG plugins (plugin/insncount.c for qemu-user,
plugin/syscount.c for qemu-system) on demand.

A shared object is cached by the hash of its source, the API header they share
and the host compiler's version, so it is built once per cache (cache.py); the build goes
to a temporary name and is renamed into place, so parallel test workers never see
half a file.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from flagbench import procs
from flagbench.cache import cache_dir
from flagbench.errors import UserError
from flagbench.toolchains import tool_version

PLUGIN_DIR = Path(__file__).resolve().parent.parent / "plugin"
API_HEADER = PLUGIN_DIR / "qemu_plugin_api.h"
HOST_CC = "gcc"


def plugin_path(name: str = "insncount") -> Path:
    """The built plugin NAME (plugin/NAME.c), compiling it first when the cache has none
    for this source."""
    if shutil.which(HOST_CC) is None:
        raise UserError(f"the qemu plugin {name} needs a host C compiler: apt-get install gcc")
    source_path = PLUGIN_DIR / f"{name}.c"
    source = source_path.read_bytes() + API_HEADER.read_bytes()
    key = hashlib.sha256(source + tool_version(HOST_CC).encode()).hexdigest()[:16]
    out = cache_dir() / "plugins" / f"{name}-{key}.so"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".so", dir=out.parent)
    os.close(fd)
    argv = [HOST_CC, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall",
            "-o", tmp, str(source_path)]
    proc = procs.run(argv, timeout=300)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise UserError(f"building the qemu plugin {name} failed: {proc.failure}: {proc.stderr.strip()}")
    os.replace(tmp, out)
    return out
