"""The suite's one kernel configuration: tinyconfig x86_64 on Debian's 6.1 tree plus the box's
fragments (src/flagbench/run/guest/boot-x86_64.config and box-x86_64.config: serial console,
initramfs, virtio-net, kexec, /proc/config.gz). The test kernel (tests/data/kernel), the kexec
test box (`flagbench box`), the kexec variants (config = "host": the box's own), the labgrid
boards and the kernel series all configure to this same .config, so on a fresh machine the
suite compiles one kernel for real: every other cell starts from its O= directory
(kbuild/seed.py) or hits ccache (a series' git walk).

`shared_kernel()` is that one build (tests/conftest.py asks for it before the first test of each
module that builds kernels): under a file lock in the cache, so the two xdist workers of
`make test` build it once; a later session finds it cached and runs no make.

    from kernel_util import build_test_kernels
    kernels = build_test_kernels()            # {"default": KernelBuild, "patched": KernelBuild}
    kernels["default"].vmlinux, kernels["default"].image
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flagbench import spec
from flagbench.build import cache_dir
from flagbench.kbuild import source
from flagbench.kbuild.build import KernelBuild, build_kernels
from flagbench.run.guest.box import FRAGMENTS

EXPERIMENT = Path(__file__).resolve().parent / "data" / "kernel"
BOOT_FRAGMENT = Path(spec.__file__).resolve().parent / "run" / "guest" / "boot-x86_64.config"
assert BOOT_FRAGMENT in FRAGMENTS
# an experiment of the tests' own configures like the rest with `fragments = {FRAGMENTS_TOML}`
FRAGMENTS_TOML = "[" + ", ".join(f'"{f}"' for f in FRAGMENTS) + "]"


def missing_tools() -> list[str]:
    """What a kernel build needs that is not here (the test skips, naming it)."""
    need = ["make", "gcc", "ccache", "flex", "bison", "bc", "patch", "tar"]
    out = [t for t in need if shutil.which(t) is None]
    if not Path("/usr/src/linux-source-6.1.tar.xz").is_file():
        out.append("linux-source-6.1")
    return out


def test_experiment() -> spec.Experiment:
    return spec.load(EXPERIMENT)


test_experiment.__test__ = False   # a helper, not a test


def build_test_kernels(variants=("default", "patched"), *, extra_fragments=()) -> dict[str, KernelBuild]:
    """The named variants of the test kernel, built (or cached); skips when tools are missing."""
    missing = missing_tools()
    if missing:
        pytest.skip(f"kernel build needs {', '.join(missing)} (scripts/install-deps)")
    exp = test_experiment()
    cells = [c for c in exp.cells() if c.variant.name in variants]
    with source.locked(cache_dir() / "kernel" / "test-kernel.lock"):
        builds = build_kernels(exp, cells, jobs=2, progress=False, extra_fragments=extra_fragments)
    return {b.cell.variant.name: b for b in builds}


def shared_kernel() -> KernelBuild:
    """The suite's one cold kernel build (the test kernel's `default`), built or cached."""
    return build_test_kernels(("default",))["default"]


def build_shared_kernel_main() -> None:
    """The background build tests/conftest.py starts: flagbench's own signal handling (SIGTERM
    ends make and every compiler), and SIGTERM to itself when the pytest worker that started it
    is gone (a worker killed mid-run must not leave a kernel build behind)."""
    import os
    import signal
    import threading
    import time

    from flagbench import procs
    procs.install()
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, daemon=True).start()
    try:
        shared_kernel()
    except procs.Terminated:
        raise SystemExit(143) from None


def vmlinux_files() -> list[Path]:
    """Real vmlinux files to hold a reader to: the suite's own (the shared kernel; its `patched`
    sibling differs in one function, nothing more to check), or FLAGBENCH_KERNEL_PAIR's
    vmlinux.old and vmlinux.new when set (bench/make-kernel-pair --big: over 20k functions)."""
    import os
    pair = os.environ.get("FLAGBENCH_KERNEL_PAIR")
    if pair:
        return [Path(pair) / "vmlinux.old", Path(pair) / "vmlinux.new"]
    return [shared_kernel().vmlinux]


def appending_patch(src: Path, rel: str, line: str) -> str:
    """A unified diff that appends LINE to the file REL of the tree at SRC (after its last line,
    so no line of it moves: __LINE__ and every object's code stay as they were)."""
    lines = (src / rel).read_text().splitlines()
    tail = lines[-3:]
    return (f"--- a/{rel}\n+++ b/{rel}\n@@ -{len(lines) - len(tail) + 1},{len(tail)} "
            f"+{len(lines) - len(tail) + 1},{len(tail) + 1} @@\n"
            + "".join(f" {t}\n" for t in tail) + f"+{line}\n")


# A stand-in for a kernel tree's top Makefile: the Kbuild targets flagbench calls (make -C SRC O=DIR
# ...): tinyconfig writes an empty .config, olddefconfig keeps it; a test appends `all`'s recipe.
STAND_IN_KBUILD = """VERSION = 6
PATCHLEVEL = 1
SUBLEVEL = 0
tinyconfig:
\t: > $(O)/.config
olddefconfig:
\t@true
all:
"""
