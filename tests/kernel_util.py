"""The test kernel, shared by the kernel build tests and the boot tests: tinyconfig x86_64 on
Debian's 6.1 tree plus src/flagbench/run/guest/boot-x86_64.config (tests/data/kernel).

Built through the content cache, so a second test session (or the second xdist worker) runs
no make; a file lock makes two workers build once. `patched` changes one function, so after
`default` it is nearly all ccache hits.

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

EXPERIMENT = Path(__file__).resolve().parent / "data" / "kernel"
BOOT_FRAGMENT = Path(spec.__file__).resolve().parent / "run" / "guest" / "boot-x86_64.config"


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


def appending_patch(src: Path, rel: str, line: str) -> str:
    """A unified diff that appends LINE to the file REL of the tree at SRC (after its last line,
    so no line of it moves: __LINE__ and every object's code stay as they were)."""
    lines = (src / rel).read_text().splitlines()
    tail = lines[-3:]
    return (f"--- a/{rel}\n+++ b/{rel}\n@@ -{len(lines) - len(tail) + 1},{len(tail)} "
            f"+{len(lines) - len(tail) + 1},{len(tail) + 1} @@\n"
            + "".join(f" {t}\n" for t in tail) + f"+{line}\n")
