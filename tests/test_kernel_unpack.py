"""Debian's kernel tree unpacked into the cache (source.base_tree, as every kernel build asks for
it): on a small real tarball made here (tar, xz) standing in for linux-source, in a cache of the
test's own. A killed unpack's directory is removed by the next; an interrupted one takes its own."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flagbench.kbuild import source

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def tarball(tmp_path, monkeypatch):
    """linux-source-9.9.tar.xz: a top Makefile with its version lines and 200 files beside it."""
    top = tmp_path / "made" / "linux-source-9.9"
    (top / "lib").mkdir(parents=True)
    (top / "Makefile").write_text("VERSION = 9\nPATCHLEVEL = 9\nSUBLEVEL = 1\nEXTRAVERSION =\n")
    for i in range(200):
        (top / "lib" / f"f{i}.c").write_text(f"int f{i};\n" * 50)
    out = tmp_path / "linux-source-9.9.tar.xz"
    subprocess.run(["tar", "-cJf", str(out), "-C", str(top.parent), top.name], check=True)
    monkeypatch.setitem(source.DEBIAN_SOURCES, "debian:9.9", out)
    monkeypatch.setenv("FLAGBENCH_CACHE", str(tmp_path / "cache"))
    return out


def test_unpacks_once_and_leaves_no_killed_unpack_behind(tarball, tmp_path):
    home = tmp_path / "cache" / "kernel" / "trees" / "debian-9.9"
    (home / "unpack-999999" / "linux-source-9.9").mkdir(parents=True)   # a kill -9'd unpack's
    tree = source.base_tree("debian:9.9")
    assert sorted(p.name for p in home.iterdir()) == [source.MARKER, "src"]
    assert (home / "src" / "lib" / "f199.c").is_file()
    assert tree.version == "9.9.1" and tree.src == home / "src"
    stamp = (home / source.MARKER).stat().st_mtime_ns
    assert source.base_tree("debian:9.9") == tree and (home / source.MARKER).stat().st_mtime_ns == stamp


def test_an_interrupted_unpack_takes_tar_and_its_half_tree_with_it(tarball, tmp_path):
    """SIGINT mid-unpack (a Ctrl-C of make demo or a build): tar ends, its half-written tree goes.
    tar is held back by a FIFO standing in for the tarball's first bytes, so the signal comes mid-way."""
    fifo = tmp_path / "slow.tar.xz"
    os.mkfifo(fifo)
    code = ("import sys; from pathlib import Path; from flagbench import procs; from flagbench.kbuild import source; "
            f"source.DEBIAN_SOURCES['debian:9.9'] = Path({str(fifo)!r}); procs.install()\n"
            "try:\n    source.base_tree('debian:9.9')\nexcept procs.Terminated as e:\n    sys.exit(e.exit_status)")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "FLAGBENCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    writer = os.open(fifo, os.O_WRONLY)          # tar has opened it: it is running
    os.write(writer, tarball.read_bytes()[:4096])
    home = tmp_path / "cache" / "kernel" / "trees" / "debian-9.9"
    deadline = time.monotonic() + 30
    while not list(home.glob("unpack-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(home.glob("unpack-*"))
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    os.close(writer)
    assert proc.returncode == 130, err
    assert not list(home.glob("unpack-*")) and not (home / "src").exists()
    assert subprocess.run(["pgrep", "-f", f"tar -xJf {fifo}"], capture_output=True).returncode == 1
