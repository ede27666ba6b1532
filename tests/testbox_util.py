"""The kexec test box: flagbench.run.guest.box (what `flagbench box start` boots), one per test,
its state in the test's own directory.

    from testbox_util import booted_box
    with booted_box(tmp_path) as box:          # booted, answering ssh
        env = {"FLAGBENCH_SSH": box.ssh_env} # "ssh -F CONFIG": the alias "box" resolves through it
        ...                                  # flagbench run EXP --host box
    # qemu stopped
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import pytest

from flagbench.run.guest import box as kbox


@contextlib.contextmanager
def booted_box(dir: Path, alias: str = "box") -> Iterator[kbox.Box]:
    missing = kbox.missing()
    if missing:
        pytest.skip(f"the kexec test box needs {', '.join(missing)} (scripts/install-deps)")
    b = kbox.start(Path(dir), alias)
    try:
        yield b
    finally:
        kbox.stop(b.dir)
