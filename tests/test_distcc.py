"""Compiles sent through distcc (distcc.py) to real distccd's on 127.0.0.1: two that compile as
this machine does, one whose gcc is gcc-11 (another version: must be dropped), and a port where
nothing answers. Objects built through them are the bytes of a local build; the counts printed
agree with the daemons' own logs."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment
from distccd_util import alive_in_group, compiles_done, distccd
from redis_util import free_port

from flagbench import distcc

PLAIN = '[variants]\ndefault = {}\n'
SOURCES = {f"f{i}.c": f"static int sq(int x) {{ return x * x; }}\nint f{i}(int x) {{ return sq(x) + {i}; }}\n"
           for i in range(6)}


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    if shutil.which("gcc-11") is None:
        pytest.skip("gcc-11 is not installed (scripts/install-deps: gcc-11-hppa64-linux-gnu brings it)")
    base = tmp_path_factory.mktemp("distccd")
    with distccd(base / "a") as a, distccd(base / "b") as b, distccd(base / "old", compiler="gcc-11") as old:
        yield {"a": a, "b": b, "old": old, "dead": f"127.0.0.1:{free_port()}/2", "dir": base}


def _json_build(exp: Path, cache: Path, hosts: str | None, extra_env: dict | None = None):
    env = {"CCACHE_DIR": str(cache / "ccache"), **(extra_env or {})}
    if hosts is not None:
        env[distcc.ENV] = hosts
    done = flagbench("build", exp, "--format", "json", "--jobs", "4", cache=cache / "flagbench", env=env)
    assert done.returncode == 0, done.stderr
    return {c["cell"]: c for c in json.loads(done.stdout)["cells"]}, done.stderr


def test_c_cells_compile_on_the_good_hosts_only(farm, tmp_path):
    exp = write_experiment(tmp_path / "exp", f"""
        sources = {json.dumps(sorted(SOURCES))}
        [build]
        distcc = ["{farm['a']}", "{farm['b']}", "{farm['old']}", "{farm['dead']}"]
        [variants]
        default = {{}}
        o1 = {{ cflags = ["-O1", "-g"] }}
        native = {{ cflags = ["-march=native"] }}
        """, SOURCES)
    before = {k: compiles_done(farm["dir"] / k) for k in ("a", "b", "old")}
    sent, stderr = _json_build(exp, tmp_path / "one", None)
    local, _ = _json_build(exp, tmp_path / "two", "")            # FLAGBENCH_DISTCC_HOSTS="": off
    n = len(SOURCES)
    for key in ("default/x86_64/gcc", "o1/x86_64/gcc"):
        counts = sent[key]["distcc"]
        assert counts["compiles"] == counts["remote"] == n, counts
        assert set(counts["by_host"]) <= {distcc.shown(farm["a"]), distcc.shown(farm["b"])}, counts
        assert local[key]["distcc"] is None
    assert sent["native/x86_64/gcc"]["distcc"] is None              # -march=native: not sent at all
    assert "variant native: -march=native compiles here only" in stderr
    assert f"distcc host {distcc.shown(farm['old'])} dropped: its gcc is another version" in stderr
    assert "12." in stderr and "11." in stderr                      # both versions named
    assert f"distcc host {distcc.shown(farm['dead'])} dropped: does not answer" in stderr
    # the daemons' own logs: every remote compile, and none on the old compiler's host but the probe
    done = {k: compiles_done(farm["dir"] / k) - before[k] for k in ("a", "b", "old")}
    assert done["a"] + done["b"] == 2 * n + 2                       # + one probe each
    assert done["old"] == 1
    for key in sent:
        for x, y in zip(sent[key]["objects"], local[key]["objects"]):
            assert Path(x).read_bytes() == Path(y).read_bytes(), (key, x)


def test_text_output_says_where_compiles_went(farm, tmp_path):
    exp = write_experiment(tmp_path / "exp", f'sources = {json.dumps(sorted(SOURCES))}\n' + PLAIN, SOURCES)
    done = flagbench("build", exp, cache=tmp_path / "cache", env={distcc.ENV: f"{farm['a']} {farm['b']}"})
    assert done.returncode == 0, done.stderr
    assert f"distcc: {len(SOURCES)} compiles, {len(SOURCES)} remote (100%" in done.stdout
    again = flagbench("build", exp, cache=tmp_path / "cache", env={distcc.ENV: f"{farm['a']} {farm['b']}"})
    assert "cached" in again.stdout and "distcc:" not in again.stdout and "dropped" not in again.stderr


def test_behind_ccache_the_misses_go_to_distcc(farm, tmp_path):
    """With a ccache remote the compile runs through ccache, which hands its misses to distcc
    (CCACHE_PREFIX): a first machine sends them, a second machine's hits send nothing."""
    exp = write_experiment(tmp_path / "exp", f'sources = {json.dumps(sorted(SOURCES))}\n' + PLAIN, SOURCES)
    remote = {"FLAGBENCH_CCACHE_REMOTE": f"file:{tmp_path / 'shared'}"}
    first, _ = _json_build(exp, tmp_path / "one", f"{farm['a']} {farm['b']}", remote)
    second, _ = _json_build(exp, tmp_path / "two", f"{farm['a']} {farm['b']}", remote)
    (one,), (two,) = first.values(), second.values()
    assert one["ccache"]["misses"] == one["distcc"]["remote"] == len(SOURCES), one
    assert two["ccache"]["remote_hits"] == len(SOURCES) and two["distcc"]["compiles"] == 0, two


@pytest.mark.parametrize("entry, message", [
    ("host,cpp", "pump mode (,cpp) is not used"),
    ("host:99999/2", "port out of range"),
    ("host/2 other", "not HOST, HOST/LIMIT"),
    ("--randomize", "not HOST, HOST/LIMIT"),
    ("host/0", "a slot count of 0 sends it nothing"),
])
def test_a_bad_host_is_one_line_and_exit_2(tmp_path, entry, message):
    exp = write_experiment(tmp_path / "exp", f'sources = ["a.c"]\n\n[build]\ndistcc = ["ok/2", "{entry}"]\n' + PLAIN)
    done = flagbench("build", exp, cache=tmp_path / "cache")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and message in done.stderr and "experiment.toml:4:" in done.stderr


def test_a_bad_environment_host_is_one_line_and_exit_2(tmp_path):
    exp = write_experiment(tmp_path / "exp", 'sources = ["a.c"]\n' + PLAIN)
    done = flagbench("build", exp, cache=tmp_path / "cache", env={distcc.ENV: "good/2 bad,cpp"})
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"flagbench build: {distcc.ENV}: distcc host 'bad,cpp': pump mode"), done.stderr


def test_the_daemons_stop_with_their_workers(tmp_path):
    with distccd(tmp_path / "d") as host:
        subprocess.run(["distcc", "gcc", "--version"], capture_output=True, env={"DISTCC_HOSTS": host})
        pgid = _group_of_port(int(distcc.shown(host).rsplit(":", 1)[1]))
        assert pgid and alive_in_group(pgid)
    assert not alive_in_group(pgid)


def _group_of_port(port: int) -> int | None:
    """The process group of the distccd listening on PORT (by its command line)."""
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            if cmd[0] == b"distccd" and str(port).encode() in cmd:
                stat = (entry / "stat").read_text()
                return int(stat[stat.rindex(")") + 2:].split()[2])
        except (OSError, IndexError):
            continue
    return None


def test_kernel_cells_send_ccache_misses_but_never_native_flags(farm, tmp_path):
    """The Kbuild hook on two planned cells (only the fields it reads): the one whose KCFLAGS
    name this CPU stays here, the other gets ccache's prefix and the hosts that passed the probe."""
    from types import SimpleNamespace

    from flagbench.kbuild.build import DISTCC_LOG, _send_to_distcc

    def plan(key, kcflags):
        return SimpleNamespace(cell=SimpleNamespace(key=key), odir=tmp_path / key, env={},
                               make=["make", "-C", "src", f"O={tmp_path / key}", "ARCH=x86_64",
                                     "HOSTCC=ccache gcc", "CC=ccache gcc", f"KCFLAGS={kcflags}"])
    native, plain = plan("native", "-O2 -march=native"), plan("plain", "-O2")
    said = []
    _send_to_distcc([native, plain], (farm["a"], farm["old"], farm["dead"]), said.append)
    assert native.env == {}, said
    assert plain.env == {"DISTCC_HOSTS": farm["a"], "DISTCC_LOG": str(tmp_path / "plain" / DISTCC_LOG),
                         "CCACHE_PREFIX": "distcc"}, said
    assert said[0] == "native: -march=native compiles here only, not through distcc (distcc#331)"
    # behind ccache the host is sent /usr/bin/gcc, not `gcc`: the probe sent that too
    assert said[1].startswith(f"distcc host {distcc.shown(farm['old'])} dropped: its /usr/bin/gcc is another version")
    assert said[2].startswith(f"distcc host {distcc.shown(farm['dead'])} dropped: does not answer")
    assert len(said) == 3


# -- Kbuild ---------------------------------------------------------------------------------------
_KERNEL_LINE = re.compile(r"^(\S+/x86_64/gcc)\s+built in \d+ s \((\d+) compiled(?:, from \S+)?\)\s+(/\S+)$", re.M)
_SPREAD = re.compile(r"^\s+distcc: (\d+) compiles, (\d+) remote \(\d+%[^)]*\), (\d+) here", re.M)
_MISSES = re.compile(r"^\s+ccache: \d+ compiles, .* (\d+) misses", re.M)
# The build identity (KBUILD_BUILD_HOST, one per cell) is in these alone: the version objects, the
# compressed vmlinux and the setup header that records its size, and vmlinux.o.
IDENTITY_OBJECTS = {"init/version.o", "init/version-timestamp.o", "arch/x86/boot/version.o",
                    "arch/x86/boot/header.o", "arch/x86/boot/compressed/piggy.o", "vmlinux.o"}


# The header the test variant touches: 28 of tinyconfig's 682 objects include it, so a change
# to it misses ccache there (and only there) while the rest come from the test kernel's build.
# (include/linux/syscalls.h, 83 includers, said no more at three times the compiles.)
TOUCHED_HEADER = "include/linux/utsname.h"


@pytest.mark.slow
def test_kernel_through_distcc_is_the_local_build(farm, tmp_path):
    """The test kernel (tinyconfig, kernel_util) with a declaration of a nonce appended to a header:
    every object that includes it misses ccache (its preprocessed text changed), and those misses
    compile on the two good distccd's; the rest are the local build's ccache hits. An unused
    declaration changes no code, so
    every object is the bytes of the test kernel built here (a cold distcc build of the whole
    kernel would say no more, at ten minutes of this machine)."""
    import secrets

    from kernel_util import FRAGMENTS_TOML, appending_patch, build_test_kernels

    local = build_test_kernels(("default",))["default"]    # the reference, and a warm ccache
    nonce = secrets.token_hex(8)                           # a result no earlier session stored
    patch = appending_patch(local.src, TOUCHED_HEADER, f"extern int flagbench_distcc_nonce_{nonce};")
    exp = write_experiment(tmp_path / "kexp", f"""
        name = "distcc-kernel"
        targets = ["x86_64"]
        [kernel]
        source = "debian:6.1"
        config = "tinyconfig"
        fragments = {FRAGMENTS_TOML}
        [variants]
        touched = {{ patches = ["nonce.patch"] }}
        """, {"nonce.patch": patch})
    before = {k: compiles_done(farm["dir"] / k) for k in ("a", "b")}
    done = flagbench("build", exp, "--jobs", "4", timeout=1800, env={distcc.ENV: f"{farm['a']} {farm['b']}"})
    built = {m.group(1).split("/")[0]: Path(m.group(3)) for m in _KERNEL_LINE.finditer(done.stdout)}
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        print(done.stdout)
        assert set(built) == {"touched"}, done.stdout + done.stderr
        spread = [tuple(map(int, m.groups())) for m in _SPREAD.finditer(done.stdout)]
        misses = [int(m.group(1)) for m in _MISSES.finditer(done.stdout)]
        assert len(spread) == 1 and len(misses) == 1, done.stdout + done.stderr
        (total, remote, here), = spread
        # ccache's misses went through distcc, to the remote hosts (a clean-clone run counted 87
        # misses and 86 compiles in distcc's log: the one missing is not explained yet)
        assert remote + here == total and misses[0] >= 20, (spread, misses)   # the header's includers
        assert remote >= 0.9 * misses[0], (spread, misses)
        daemons = sum(compiles_done(farm["dir"] / k) - before[k] for k in ("a", "b"))
        assert daemons == remote + 2           # + the check's probe on each host
        odir, compared = built["touched"], 0
        for ref in local.dir.rglob("*.o"):
            rel = ref.relative_to(local.dir)
            if str(rel) in IDENTITY_OBJECTS:
                continue
            assert _same_code(odir / rel, ref, tmp_path), f"{rel} differs"
            compared += 1
        assert compared > 300, compared
        assert _text(odir / "vmlinux", tmp_path) == _text(local.vmlinux, tmp_path)
    finally:
        for odir in built.values():   # this test's O= directory and its patched tree in the cache
            shutil.rmtree(odir.parent, ignore_errors=True)
            shutil.rmtree(odir.parents[2], ignore_errors=True)


def _same_code(a: Path, b: Path, tmp: Path) -> bool:
    """The same bytes, or the same once debug info is stripped: the few objects Kbuild builds
    with -g (the real-mode setup, objtool) name their build directory, which ccache shares
    between cells (CCACHE_NOHASHDIR), so the reference's may name another cell's."""
    if a.read_bytes() == b.read_bytes():
        return True
    stripped = []
    for n, obj in enumerate((a, b)):
        out = tmp / f"stripped{n}.o"
        subprocess.run(["objcopy", "--strip-debug", str(obj), str(out)], check=True)
        stripped.append(out.read_bytes())
    return stripped[0] == stripped[1]


def _text(vmlinux: Path, tmp: Path) -> bytes:
    """The bytes of vmlinux's .text."""
    out = tmp / "text.bin"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.text", str(vmlinux), str(out)], check=True)
    return out.read_bytes()


class _Listener:
    """A port that takes connections and counts them: SILENT ones are held open unanswered (a
    distccd hung or behind a firewall that accepts), else closed at once (a distccd that refuses
    this client: --allow for other addresses)."""

    def __init__(self, silent: bool):
        import socket
        import threading
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted, self.held, self.silent = 0, [], silent
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            if self.silent:
                self.held.append(conn)
            else:
                conn.close()

    def close(self):
        self.sock.close()
        for conn in self.held:
            conn.close()


@pytest.mark.parametrize("silent", [True, False], ids=["silent", "refusing"])
def test_a_host_that_does_not_answer_is_probed_once_per_run(monkeypatch, silent):
    """One bounded probe per host per run, whatever the compilers: the first compiler's probe
    connects (distcc itself may reconnect within it), the later compilers' connect no more."""
    if shutil.which("distcc") is None:
        pytest.skip("distcc is not installed")
    monkeypatch.setattr(distcc, "PROBE_TIMEOUT", 4.0)
    monkeypatch.setattr(distcc, "_DECIDED", {})
    monkeypatch.setattr(distcc, "_SILENT", {})
    server = _Listener(silent)
    said: list[str] = []
    try:
        host = f"127.0.0.1:{server.port}/2"
        assert distcc.hosts_for([host], [["gcc"]], said.append) == ()
        first = server.accepted
        assert distcc.hosts_for([host], [["gcc", "-fno-common"]], said.append) == ()
        assert distcc.hosts_for([host], [["cc"]], said.append) == ()
    finally:
        server.close()
    assert first > 0 and server.accepted == first, (first, server.accepted, said)
    dropped = [s for s in said if s.startswith(f"distcc host 127.0.0.1:{server.port} dropped:")]
    assert len(dropped) == 3 and len(set(dropped)) == 1, said     # said per compiler, asked once
    assert "within 4 s, 1 try (" in dropped[0], said
