"""ccache's remote storage as a build cache shared by machines: a real redis-server on
127.0.0.1, two empty local ccache directories and two empty flagbench caches standing in
for two machines. The second machine's build of the same cell takes its objects from redis."""
from __future__ import annotations

import contextlib
import json
import socket
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment
from redis_util import free_port, keys, redis_server

from flagbench import ccache

SOURCES = {f"f{i}.c": f"int f{i}(int x) {{ return x * {i + 3} + {i}; }}\n" for i in range(4)}


def _machine(tmp: Path, name: str, url: str | None, exp: Path, env_remote: str | None = None):
    """`flagbench build EXP --format json` on a fresh 'machine': its own caches, nothing shared."""
    home = tmp / name
    env = {"CCACHE_DIR": str(home / "ccache"), "CCACHE_CONFIGPATH": str(home / "ccache.conf")}
    if env_remote is not None:
        env[ccache.ENV] = env_remote
    done = flagbench("build", exp, "--format", "json", "-q", cache=home / "flagbench", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["cells"], done


def test_second_machine_takes_objects_from_redis(tmp_path):
    with redis_server(tmp_path / "redis") as url:
        exp = write_experiment(tmp_path / "exp", f"""
            sources = {json.dumps(sorted(SOURCES))}
            [cache]
            remote = "{url}"
            [variants]
            default = {{}}
            o1 = {{ cflags = ["-O1"] }}
            """, SOURCES)
        first, _ = _machine(tmp_path, "one", url, exp)
        stored = keys(url)
        second, done = _machine(tmp_path, "two", url, exp)
    n = len(SOURCES)
    for cell in first:
        assert cell["ccache"]["misses"] == n and cell["ccache"]["remote_hits"] == 0, cell
    assert stored >= 2 * n           # a result (and a manifest) per object
    for a, b in zip(first, second):
        assert b["ccache"]["remote_hits"] == n and b["ccache"]["misses"] == 0, b
        for x, y in zip(a["objects"], b["objects"]):
            assert Path(x).read_bytes() == Path(y).read_bytes()
    # what a person reads
    text = flagbench("build", exp, cache=tmp_path / "three" / "flagbench",
                     env={"CCACHE_DIR": str(tmp_path / "three" / "ccache"),
                          "CCACHE_CONFIGPATH": str(tmp_path / "three" / "ccache.conf"), ccache.ENV: ""})
    assert text.returncode == 0, text.stderr
    assert f"ccache: {n} compiles" not in text.stdout     # remote turned off by the empty variable: no ccache


def test_environment_names_the_remote(tmp_path):
    """FLAGBENCH_CCACHE_REMOTE works without [cache], and the text output shows the counts."""
    with redis_server(tmp_path / "redis") as url:
        exp = write_experiment(tmp_path / "exp", f"""
            sources = {json.dumps(sorted(SOURCES))}
            [variants]
            default = {{}}
            """, SOURCES)
        _machine(tmp_path, "one", url, exp, env_remote=url)
        home = tmp_path / "two"
        done = flagbench("build", exp, cache=home / "flagbench",
                         env={"CCACHE_DIR": str(home / "ccache"), "CCACHE_CONFIGPATH": str(home / "ccache.conf"),
                              ccache.ENV: url})
    assert done.returncode == 0, done.stderr
    n = len(SOURCES)
    assert f"ccache: {n} compiles, 0 local hits, {n} remote hits, 0 misses (remote {url})" in done.stdout


@pytest.mark.parametrize("value", ["ftp://host", "redis://a b", "", "redis://127.0.0.1:99999", "redis://:@",
                                   "http:", "http://", "redis://h:port", "redis+unix:"])
def test_bad_remote_is_bad_input(tmp_path, value):
    exp = write_experiment(tmp_path / "exp", f"""
        sources = ["a.c"]
        [cache]
        remote = "{value}"
        [variants]
        default = {{}}
        """)
    done = flagbench("build", exp, cache=tmp_path / "cache")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "experiment.toml:3:" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_stats_log_counts(tmp_path):
    """The stats log's blocks: a local hit, a remote hit, a miss, an uncacheable link."""
    log = tmp_path / "log"
    log.write_text("# a.c\ndirect_cache_hit\nlocal_storage_hit\n"
                   "# b.c\ndirect_cache_hit\nlocal_storage_miss\nremote_storage_hit\nremote_storage_read_hit\n"
                   "# c.c\ncache_miss\nlocal_storage_miss\nremote_storage_miss\n"
                   "# d\ncalled_for_link\n")
    s = ccache.read_stats(log, "redis://127.0.0.1:1")
    assert (s.compiles, s.local_hits, s.remote_hits, s.misses, s.uncacheable) == (3, 1, 1, 1, 1)
    assert ccache.shown_remote("redis://u:secret@h:1") == "redis://***@h:1"


@pytest.mark.parametrize("value", ["redis://:@", "redis://127.0.0.1:99999", "gopher://x"])
def test_a_bad_remote_in_the_environment_is_bad_input(tmp_path, value):
    exp = write_experiment(tmp_path / "exp", """
        sources = ["a.c"]
        [variants]
        default = {}
        """)
    done = flagbench("build", exp, cache=tmp_path / "cache", env={ccache.ENV: value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and ccache.ENV in done.stderr and "Traceback" not in done.stderr


@contextlib.contextmanager
def silent_server():
    """A TCP socket on 127.0.0.1 that takes connections (the kernel's backlog) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"redis://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("case", ["refused", "wrong password", "silent"])
def test_a_remote_that_cannot_be_used_is_one_line_and_the_build_goes_on(tmp_path, case):
    exp = write_experiment(tmp_path / "exp", f"""
        sources = {json.dumps(sorted(SOURCES))}
        [variants]
        default = {{}}
        """, SOURCES)
    with contextlib.ExitStack() as stack:
        if case == "refused":
            url, why = f"redis://127.0.0.1:{free_port()}", "connection refused"
        elif case == "wrong password":
            url = stack.enter_context(redis_server(tmp_path / "redis", password="right"))
            url, why = url.replace("redis://", "redis://wrong@"), "password"
        else:
            url, why = stack.enter_context(silent_server()), "does not answer"
        home = tmp_path / "m"
        done = flagbench("build", exp, "--format", "json", "-q", cache=home / "flagbench",
                         env={"CCACHE_DIR": str(home / "ccache"), "CCACHE_CONFIGPATH": str(home / "ccache.conf"),
                              ccache.ENV: url})
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and why in lines[0] and "local cache only" in lines[0], done.stderr
    assert "wrong@" not in lines[0]                  # no password shown
    assert [c["ccache"] for c in json.loads(done.stdout)["cells"]] == [None]   # no remote was used
