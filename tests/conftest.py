"""What several test files share: the CLI run as users run it, experiment writers, the
object cache, and typed benches from dicts.

Helpers are plain functions (`from conftest import flagbench, write_experiment`); the
cache is a fixture (`object_cache`, or `module_cache` for one cache per module).
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

# As flagbench does before it imports labgrid (hosts/labgrid.py): tests that hold a place in
# this process fork programs beside gRPC's threads, and its fork handlers crash the children.
# (pyproject's addopts keep labgrid's own pytest plugin, which imports gRPC first, unloaded.)
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
CACHE_ENV = "FLAGBENCH_CACHE"


def flagbench(*args, cwd=None, env: dict | None = None, cache: Path | None = None, timeout: float = 900,
              clean_env: bool = False) -> subprocess.CompletedProcess:
    """`python -m flagbench ARGS` in a subprocess: (returncode, stdout, stderr) as users see them.
    env adds to the environment (or replaces it, clean_env=True); cache sets FLAGBENCH_CACHE."""
    base = {"PATH": "/usr/bin:/bin"} if clean_env else dict(os.environ)
    base["PYTHONPATH"] = str(ROOT / "src")
    if cache is not None:
        base[CACHE_ENV] = str(cache)
    return subprocess.run([sys.executable, "-m", "flagbench", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**base, **(env or {})}, timeout=timeout)


def flagbench_isolated(*args, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    """`flagbench ARGS` as a new user on a fresh machine runs it: a minimal environment, and
    its one cache root (objects, qemu plugins) under CWD: nothing shared with other tests."""
    cwd = Path(cwd)
    return flagbench(*args, cwd=cwd, clean_env=True, cache=cwd / "cache", timeout=timeout)


def wait_until(predicate, within: float, what: str, every: float = 0.2) -> None:
    """Poll PREDICATE until true; after WITHIN seconds fail the test, naming WHAT it waited for."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


def stop_server(proc: subprocess.Popen, within: float = 10) -> None:
    """A server the test started: SIGTERM, then SIGKILL if it is not gone WITHIN seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def write_experiment(dir: Path, toml: str, sources: dict[str, str] | None = None) -> Path:
    """An experiment directory: experiment.toml (dedented) and its sources by name -> text."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    for name, text in (sources if sources is not None else {"a.c": "int a_fn(int x) { return x * 3; }\n"}).items():
        (dir / name).write_text(text)
    (dir / "experiment.toml").write_text(textwrap.dedent(toml).lstrip("\n"))
    return dir


def bench(table: dict, root: Path = Path("."), **kw):
    """A typed bench (benchspec) from a dict shaped like a [[bench]] table."""
    from flagbench.benchspec import from_table
    return from_table(table, root=root, **kw)


@pytest.fixture
def object_cache(tmp_path, monkeypatch) -> Path:
    """A fresh object cache for one test (FLAGBENCH_CACHE), not the working directory's."""
    path = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(path))
    return path


@pytest.fixture
def module_cache(tmp_path_factory, monkeypatch) -> Path:
    """One object cache shared by the tests of a module (content-keyed, so sharing is safe)."""
    path = tmp_path_factory.getbasetemp() / "shared-object-cache"
    monkeypatch.setenv(CACHE_ENV, str(path))
    return path


@pytest.fixture(autouse=True)
def _procs_is_per_test():
    """A test that runs flagbench in-process (which calls procs.install) or sends itself a signal
    must not leave the rest of its xdist worker a subreaper that kills the test servers it
    starts as orphans, nor unable to start a program because a signal came once."""
    yield
    from flagbench import procs
    procs.uninstall()


# The modules whose slow tests build or boot x86_64 kernels, longest first (durations of a clean
# clone's run). They all start from the suite's one kernel (tests/kernel_util.py: the configuration
# the box, the kexec and labgrid variants, the series and the test kernel share): on a fresh
# machine its cold build takes minutes. So the first worker starts that build in the background
# as soon as it has collected (`make check`, without slow tests, builds nothing), the other
# modules run first beside it, and these come last, longest first (xdist hands modules out in
# collection order with --dist loadfile --no-loadscope-reorder, as `make test` runs it), so no
# worker waits idle for the build while there is other work, and no long module runs alone at
# the end. Before the first slow test of these in a worker, the build is waited for (a file lock
# in the cache: both workers share one build) or found cached.
SHARED_KERNEL_USERS = ("test_labgrid.py", "test_series.py", "test_watch_kernel.py", "test_mail_kernel.py",
                       "test_kexec.py", "test_kernel_build.py", "test_guest.py", "test_bisect.py", "test_distcc.py",
                       "test_box.py", "test_mix_c.py", "test_normalise.py")
# the longest of the others first, beside the build
LONGEST_FIRST = ("test_hosts_run.py", "test_stubs.py")
_shared_kernel_done = False
_builder = None


def _needs_shared_kernel(item) -> bool:
    if os.environ.get("FLAGBENCH_KERNEL_PAIR") and item.path.name in ("test_mix_c.py", "test_normalise.py"):
        return False   # their vmlinux files are that pair (kernel_util.vmlinux_files)
    return item.path.name in SHARED_KERNEL_USERS and item.get_closest_marker("slow") is not None


def pytest_collection_modifyitems(items):
    users = {name: i for i, name in enumerate(SHARED_KERNEL_USERS)}
    first = {name: i for i, name in enumerate(LONGEST_FIRST)}

    def order(item):
        name = item.path.name
        return (1, users[name]) if name in users else (0, first.get(name, len(first)))
    items.sort(key=order)   # stable: file order kept within


def pytest_collection_finish(session):
    """The shared kernel's build, started in the background by one worker (gw0, or a run without
    xdist) when a collected test needs it; its output in <cache>/kernel/shared-kernel.log."""
    global _builder
    if (os.environ.get("PYTEST_XDIST_WORKER", "gw0") != "gw0" or session.config.option.collectonly
            or not any(map(_needs_shared_kernel, session.items))):
        return
    from flagbench.build import cache_dir
    log_path = cache_dir() / "kernel" / "shared-kernel.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        _builder = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
             "import kernel_util; kernel_util.build_shared_kernel_main()", str(ROOT / "tests")],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), CACHE_ENV: str(cache_dir())},
            stdin=subprocess.DEVNULL,
            stdout=log, stderr=log)


def pytest_sessionfinish(session):
    if _builder is not None and _builder.poll() is None:   # the run ended first (-x, ^C): the build too
        stop_server(_builder, within=60)


def pytest_runtest_setup(item):
    global _shared_kernel_done
    if _shared_kernel_done or not _needs_shared_kernel(item):
        return
    from kernel_util import shared_kernel
    _shared_kernel_done = True        # once per worker, built or not (a test that needs it says why not)
    shared_kernel()
