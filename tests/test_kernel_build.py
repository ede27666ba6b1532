"""Kernel experiments on a real tree: Debian's linux-source-6.1, tinyconfig x86_64, built by
make through ccache (tests/kernel_util.py builds it once; later sessions find it cached).

Oracles: the tree's own scripts/bloat-o-meter run on the same two vmlinux files, the tree's
scripts/kconfig/merge_config.sh for the fragment merge, the patch file itself for what
changed (one function of lib/string.c), and the compiler's own error message.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from flagbench import spec
from flagbench.build import cache_dir
from flagbench.errors import UserError
from flagbench.kbuild import config as kconfig_file
from flagbench.size import objects, summary
from flagbench.kbuild import source
from flagbench.kbuild.build import build_kernels
from kernel_util import EXPERIMENT, FRAGMENTS_TOML, appending_patch, build_test_kernels, missing_tools, test_experiment

pytestmark = pytest.mark.slow   # kernel builds

DATA = Path(__file__).parent / "data"
PATCHED_FILE = "lib/string.c"          # what tests/data/kernel/one-function.patch changes
PATCH_LINE = "flagbench test: one function's code changes"


def flagbench(*args):
    return subprocess.run([sys.executable, "-m", "flagbench", *args], capture_output=True, text=True)


@pytest.fixture(scope="session")
def kernels():
    return build_test_kernels(("default", "patched"))


# -- the experiment file (no build) -------------------------------------------------------------
def write(tmp_path, text):
    (tmp_path / "experiment.toml").write_text(text)
    return tmp_path / "experiment.toml"


def test_kernel_table_parses_with_variant_keys():
    exp = test_experiment()
    assert exp.sources == () and exp.kernel.source == "debian:6.1" and exp.kernel.config == "tinyconfig"
    boot = [o.name for o in exp.kernel.common.options]
    assert "CONFIG_64BIT" in boot and "CONFIG_SERIAL_8250_CONSOLE" in boot
    patched = exp.kernel.changes("patched")
    assert [p.name for p in patched.patches] == ["one-function.patch"]
    assert exp.kernel.changes("default").patches == ()


def test_unknown_kernel_key_names_its_line(tmp_path):
    path = write(tmp_path, '[kernel]\nsource = "debian:6.1"\nkconfig = "tinyconfig"\n[variants]\na = {}\n')
    with pytest.raises(UserError, match=r"experiment.toml:3: unknown key 'kconfig' in \[kernel\]"):
        spec.load(path)


def test_kernel_variant_keys_need_a_kernel_table(tmp_path):
    (tmp_path / "a.c").write_text("int a;\n")
    path = write(tmp_path, 'sources = ["a.c"]\n[variants]\na = {}\nb = { kcflags = ["-O1"] }\n')
    with pytest.raises(UserError, match=r"experiment.toml:4: unknown key 'kcflags'"):
        spec.load(path)


def test_bad_fragment_line_and_reserved_make_variable(tmp_path):
    path = write(tmp_path, '[kernel]\nfragments = ["CONFIG_X=y", "CONFIG_Y y"]\n[variants]\na = {}\n')
    with pytest.raises(UserError, match=r"experiment.toml:2: fragment 'CONFIG_Y y' is not a config line"):
        spec.load(path)
    path = write(tmp_path, '[kernel]\n[variants]\na = { make = { ARCH = "arm64" } }\n')
    with pytest.raises(UserError, match=r"experiment.toml:3: make variable ARCH is set by flagbench"):
        spec.load(path)


def test_loongarch_on_the_6_1_tree_says_to_use_6_12(tmp_path):
    if missing_tools():
        pytest.skip("needs linux-source-6.1")
    path = write(tmp_path, '[kernel]\nsource = "debian:6.1"\n[variants]\na = {}\n')
    path.write_text('targets = ["loongarch64"]\ncompilers = ["clang"]\n' + path.read_text())
    with pytest.raises(UserError, match=r"loongarch64 kernels build with clang-19 .* Linux 6.5 on; "
                       r".* is 6.1.\d+: use source = \"debian:6.12\""):
        build_kernels(spec.load(path), progress=False)


def test_kcflags_the_compiler_rejects_stop_before_any_build(tmp_path):
    if missing_tools():
        pytest.skip("needs linux-source-6.1")
    path = write(tmp_path, '[kernel]\n[variants]\na = {}\nb = { kcflags = ["-mno-such-flag"] }\n')
    exp = spec.load(path)
    with pytest.raises(UserError, match=r"variant b: gcc for x86_64 rejects its kcflags -mno-such-flag: .*no-such-flag"):
        build_kernels(exp, progress=False)
    from flagbench.kbuild.build import cell_dir
    tree = source.base_tree("debian:6.1")
    assert not any(cell_dir(exp, c, tree, []).exists() for c in exp.cells())


def _fuzzy_experiment(tmp_path, fuzz_line=""):
    """A kernel experiment whose patch (tests/data/kernel/fuzzy.patch) has one context line the
    tree does not have and a stale line number: it applies only with fuzz 1, 10 lines on."""
    patch = DATA / "kernel" / "fuzzy.patch"
    return write(tmp_path, f'[kernel]\nsource = "debian:6.1"\n{fuzz_line}[variants]\n'
                           f'a = {{}}\nb = {{ patches = ["{patch}"] }}\n')


def test_fuzzed_patch_is_refused_naming_the_hunk(tmp_path):
    if missing_tools():
        pytest.skip("needs linux-source-6.1")
    # the oracle: patch(1) itself, with its default fuzz, on a copy of lib/string.c
    tree = source.base_tree("debian:6.1")
    (tmp_path / "t" / "lib").mkdir(parents=True)
    (tmp_path / "t" / "lib" / "string.c").write_text((tree.src / "lib" / "string.c").read_text())
    said = subprocess.run(["patch", "-p1", "--dry-run", "-d", str(tmp_path / "t"), "-i",
                           str(DATA / "kernel" / "fuzzy.patch")], capture_output=True, text=True)
    assert said.returncode == 0 and "Hunk #1 succeeded at 115 with fuzz 1 (offset 10 lines)" in said.stdout
    out = flagbench("build", str(_fuzzy_experiment(tmp_path)), "--quiet")
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "fuzzy.patch: hunk #1 of lib/string.c applies only with fuzz 1, at line 115 (offset +10 lines)" in err
    assert "fuzz = 1 in [kernel]" in err and "configuring" not in out.stdout


def test_fuzz_allowed_by_the_experiment_applies(tmp_path):
    if missing_tools():
        pytest.skip("needs linux-source-6.1")
    exp = spec.load(_fuzzy_experiment(tmp_path, "fuzz = 1\n"))
    assert exp.kernel.fuzz == 1
    tree = source.patched_tree(source.base_tree("debian:6.1"), exp.kernel.changes("b").patches,
                               fuzz=exp.kernel.fuzz)
    text = (tree.src / "lib" / "string.c").read_text()
    assert "flagbench test: applies only with fuzz" in text.split("EXPORT_SYMBOL(strncpy)")[0]


def test_a_tree_patched_before_fuzz_was_checked_is_checked_on_copies(tmp_path):
    """A patched tree the cache made earlier (no fuzz in its marker) is checked without being
    remade: a build may be reading it. The check patches copies of the touched files only."""
    if missing_tools():
        pytest.skip("needs linux-source-6.1")
    base = source.base_tree("debian:6.1")
    fuzzy = (DATA / "kernel" / "fuzzy.patch",)
    with pytest.raises(UserError, match=r"hunk #1 of lib/string.c applies only with fuzz 1, at line 115"):
        source.check_fuzz(base.src, fuzzy, 0)
    source.check_fuzz(base.src, fuzzy, 1)
    source.check_fuzz(base.src, (DATA / "kernel" / "one-function.patch",), 0)
    assert "flagbench test" not in (base.src / "lib" / "string.c").read_text()   # the tree untouched


@pytest.mark.parametrize("value", ["4", "-1", "true", '"2"'])
def test_fuzz_out_of_range_names_its_line(tmp_path, value):
    with pytest.raises(UserError, match=r"experiment.toml:3: fuzz must be a whole number of context lines, 0 to 3"):
        spec.load(_fuzzy_experiment(tmp_path, f"fuzz = {value}\n"))


def test_kconfig_expressions_in_tristate_logic():
    from flagbench.kbuild.kconfig import evaluate
    values = {"CONFIG_A": "y", "CONFIG_M": "m", "CONFIG_S": '"x86"', "CONFIG_N": "0x10"}
    assert evaluate("A && !B", values) == 2
    assert evaluate("A && M", values) == 1 and evaluate("B || M", values) == 1
    assert evaluate('S = "x86" && (B || A)', values) == 2 and evaluate('S != "x86"', values) == 0
    assert evaluate("N >= 16", values) == 2 and evaluate("!(A)", values) == 0
    assert evaluate("$(cc-option,-mfoo) && A", values) is None


def test_merge_matches_merge_config_sh(tmp_path):
    """The tree's merge_config.sh -m on the same base and fragment writes the same options."""
    if missing_tools():
        pytest.skip("needs linux-source-6.1")
    tree = source.base_tree("debian:6.1")
    base = tmp_path / "base.config"
    base.write_text("CONFIG_A=y\n# CONFIG_B is not set\nCONFIG_C=\"x\"\nCONFIG_D=m\n")
    fragment = tmp_path / "frag.config"
    fragment.write_text("CONFIG_B=y\n# CONFIG_A is not set\nCONFIG_E=42\nCONFIG_C=\"y z\"\n")
    out = tmp_path / "sh"
    out.mkdir()
    subprocess.run([str(tree.src / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(out), str(base),
                    str(fragment)], check=True, capture_output=True)
    mine = tmp_path / "mine.config"
    mine.write_text(base.read_text())
    from flagbench.kernelspec import fragment_file
    kconfig_file.merge(mine, list(fragment_file(fragment)))
    assert kconfig_file.read_config(mine) == kconfig_file.read_config(out / ".config")


# -- a dropped option stops the build before anything compiles ----------------------------------
def test_dropped_option_is_exit_2_naming_it_and_its_dependency():
    if missing_tools():
        pytest.skip("needs the kernel build tools")
    out = flagbench("build", str(DATA / "kernel-dropped"), "--quiet")
    assert out.returncode == 2, out.stderr
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "CONFIG_E1000: asked y" in err and "got not set" in err
    assert "depends on PCI [PCI=n]" in err                   # drivers/net/ethernet/intel/Kconfig
    assert "CONFIG_PRINTKK: asked y" in err and "wrong name" in err and "CONFIG_PRINTK" in err
    exp = spec.load(DATA / "kernel-dropped")
    tree = source.base_tree("debian:6.1")
    from flagbench.kbuild.build import cell_dir
    for cell in exp.cells():                                  # configured, never compiled
        d = cell_dir(exp, cell, tree, [])
        assert (d / ".config").is_file() and not (d / "vmlinux").exists()


# -- the built pair ---------------------------------------------------------------------------
def test_pair_builds_with_artifacts(kernels):
    for b in kernels.values():
        assert b.ok, b.error
        assert b.vmlinux.is_file() and b.system_map.is_file() and b.config.is_file()
        assert b.image is not None and b.image.name == "bzImage"
        assert b.modules == ()                               # tinyconfig: no CONFIG_MODULES
        assert "gcc" in next(iter(b.tools)) and b.tree.startswith("debian:6.1")
        assert kconfig_file.read_config(b.config)["CONFIG_64BIT"] == "y"
    assert kernels["default"].dir != kernels["patched"].dir


def test_bloat_o_meter_byte_identical_on_the_two_vmlinux(kernels):
    old, new = kernels["default"].vmlinux, kernels["patched"].vmlinux
    tree = source.base_tree("debian:6.1")
    oracle = subprocess.run([sys.executable, str(tree.src / "scripts" / "bloat-o-meter"), str(old), str(new)],
                            capture_output=True, text=True, check=True).stdout
    out = flagbench("size", str(EXPERIMENT), "--variants", "default,patched", "--format=bom")
    assert out.returncode == 0, out.stderr
    assert out.stdout == oracle
    assert "strncpy" in oracle                                # the one function the patch changes


def _section_sizes(vmlinux) -> dict[str, int]:
    """Section name -> size, as objdump -h prints them (the oracle, not flagbench's reader)."""
    out = subprocess.run(["objdump", "-h", str(vmlinux)], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 7 and words[0].isdigit():
            sizes[words[1]] = int(words[2], 16)
    return sizes


def test_aa_pair_is_byte_identical_but_for_its_identity():
    """Two variants with the same settings and names of different length (`default`, `again`):
    the same section sizes, no bloat-o-meter delta (the build identity in linux_proc_banner
    has one length), yet each kernel names its own build."""
    builds = build_test_kernels(("default", "again"))
    a, b = builds["default"], builds["again"]
    assert a.ok and b.ok, (a.error, b.error)
    if not b.cached:   # built now: from a sibling's O= directory of the same tree and .config
        # (kbuild/seed.py: default's, or the box's, which shares the suite's one configuration),
        # recompiling only what holds the build identity, and the decompressor that holds vmlinux's layout
        log = (b.dir / "flagbench-make.log").read_text()
        compiled = set(re.findall(r"^  (?:CC|AS) +(\S+)$", log, re.M))
        assert b.seeded_from is not None and b.seeded_from != b.dir, b.seeded_from
        assert (b.seeded_from / ".config").read_bytes() == (a.dir / ".config").read_bytes()
        assert compiled == {
            "init/version.o", "init/version-timestamp.o", "arch/x86/boot/version.o",
            "arch/x86/boot/header.o", "arch/x86/boot/compressed/piggy.o",
            "arch/x86/boot/compressed/misc.o"}, (b.seeded_from, compiled)
    assert a.identity != b.identity and len(a.identity) == len(b.identity)
    for build in (a, b):
        assert f"(flagbench@{build.identity})".encode() in build.vmlinux.read_bytes()
    old, new = _section_sizes(a.vmlinux), _section_sizes(b.vmlinux)
    assert {".text", ".data", ".rodata"} <= old.keys()
    assert old == new
    tree = source.base_tree("debian:6.1")
    oracle = subprocess.run([sys.executable, str(tree.src / "scripts" / "bloat-o-meter"), str(a.vmlinux),
                             str(b.vmlinux)], capture_output=True, text=True, check=True).stdout
    assert oracle.splitlines()[0] == "add/remove: 0/0 grow/shrink: 0/0 up/down: 0/0 (0)", oracle
    out = flagbench("size", str(EXPERIMENT), "--variants", "default,again", "--format=bom")
    assert out.returncode == 0 and out.stdout == oracle, out.stderr


def test_patch_variant_leaves_the_source_tree_untouched(kernels):
    tree = source.base_tree("debian:6.1")
    copy = kernels["patched"].dir.parents[2] / "src"       # <tree home>/out/<exp>/<cell>
    original, patched = tree.src / PATCHED_FILE, copy / PATCHED_FILE
    assert PATCH_LINE not in original.read_text()
    assert PATCH_LINE in patched.read_text()
    assert original.stat().st_ino != patched.stat().st_ino
    # every other file is the same inode (hard links), so the copy is cheap, and was not written
    assert (tree.src / "lib/ctype.c").stat().st_ino == (copy / "lib/ctype.c").stat().st_ino
    assert (tree.src / "Makefile").stat().st_ino == (copy / "Makefile").stat().st_ino


def test_only_the_patched_object_changed_code(kernels):
    changes = objects.compare_trees(kernels["default"].dir, kernels["patched"].dir)
    assert [c.path for c in changes] == ["lib/string.o"]
    assert len(objects.compiled_objects(kernels["default"].dir)) > 300


def test_summary_names_the_one_changed_function(kernels):
    s = summary.summarize(kernels["default"], kernels["patched"])
    assert s.functions["changed"] == 1 and s.functions["added"] == 0 and s.functions["removed"] == 0
    assert s.config_delta == []
    text = summary.render(s)
    assert "1 functions changed" in text and "bloat-o-meter's total: Before=" in text
    assert "lib/ 1" in text


def test_second_build_runs_no_make_and_make_compiles_nothing(kernels):
    exp = test_experiment()
    cells = [b.cell for b in kernels.values()]
    before = {b.cell.key: b.vmlinux.stat().st_mtime_ns for b in kernels.values()}
    again = build_kernels(exp, cells, progress=False)
    assert all(b.cached and b.ok and b.compiled == 0 for b in again)
    assert {b.cell.key: b.vmlinux.stat().st_mtime_ns for b in again} == before
    # and when make does run on the unchanged tree, it compiles nothing
    default = kernels["default"]
    state = default.dir / "flagbench-cell.json"
    with source.locked(cache_dir() / "kernel" / "test-kernel.lock"):   # the boot tests share this cell
        with source.locked(default.dir.with_name(default.dir.name + ".lock")):
            data = json.loads(state.read_text())
            state.write_text(json.dumps({**data, "stamp": "forced"}))
        rerun = build_kernels(exp, [default.cell], progress=False)[0]
    assert rerun.ok and not rerun.cached and rerun.compiled == 0
    assert rerun.vmlinux.stat().st_mtime_ns == before[default.cell.key]


def test_failing_cell_keeps_the_compiler_line_and_the_other_cell_builds(kernels):
    builds = build_test_kernels(("default", "broken"))
    assert builds["default"].ok
    broken = builds["broken"]
    assert not broken.ok and not broken.cached
    assert "init/main.c" in broken.error and "flagbench_deliberately_broken" in broken.error
    assert "error:" in broken.error.splitlines()[0]          # the compiler's line comes first
    out = flagbench("build", str(EXPERIMENT), "--format", "json", "--quiet")
    assert out.returncode == 1
    cells = {c["variant"]: c for c in json.loads(out.stdout)["cells"]}
    assert cells["default"]["ok"] and cells["default"]["cached"] and cells["default"]["vmlinux"]
    assert not cells["broken"]["ok"] and "flagbench_deliberately_broken" in cells["broken"]["error"]


def test_size_takes_a_c_experiment_too():
    """`size EXPERIMENT` on C sources: the two variants' objects as archives, bloat-o-meter's table."""
    if missing_tools():
        pytest.skip("needs linux-source-6.1 (its bloat-o-meter is the oracle)")
    from flagbench.build import archive
    from flagbench.subject import pair as variant_pair
    case = Path(__file__).parent.parent / "cases" / "long-calls"
    out = flagbench("size", str(case), "--target", "hppa", "--format=bom")
    assert out.returncode == 0, out.stderr
    pair = variant_pair(case, target="hppa")
    script = source.base_tree("debian:6.1").src / "scripts" / "bloat-o-meter"
    oracle = subprocess.run([sys.executable, str(script), str(archive(pair.old)), str(archive(pair.new))],
                            capture_output=True, text=True, check=True).stdout
    assert out.stdout == oracle and "call_once" in oracle


def _in_dir(odir: Path) -> list[int]:
    """Processes working in ODIR (Kbuild runs sh, gcc and cc1 there) or naming it (make O=...)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (cwd == str(odir) or cwd.startswith(f"{odir}/") or f"O={odir}\0" in cmdline):
            found.append(int(pid))
    return found


@pytest.mark.slow
def test_kill_9_during_a_kernel_build_leaves_no_make_and_the_next_build_succeeds(kernels, tmp_path):
    """kill -9 of flagbench while make compiles: make, sh, gcc and cc1 die with it (they ran on
    with ppid 1, and the next run's make in the same O= directory failed in fixdep)."""
    import shutil
    import time
    exp = tmp_path / "exp"
    exp.mkdir()
    # a comment appended to a header 110 objects include: the build starts from the test kernel's
    # (kbuild/seed.py) and make compiles those again (ccache hits), long enough to be caught at it
    (exp / "own-tree.patch").write_text(appending_patch(kernels["default"].src, "include/linux/syscalls.h",
                                                        "/* flagbench's kill -9 test */"))
    (exp / "experiment.toml").write_text(
        f'name = "kill9"\ntargets = ["x86_64"]\n[kernel]\nsource = "debian:6.1"\nconfig = "tinyconfig"\n'
        f'fragments = {FRAGMENTS_TOML}\n[variants]\ndefault = {{ patches = ["own-tree.patch"] }}\n')
    trees = cache_dir() / "kernel" / "trees"
    before = set(trees.glob("debian-6.1*/out/kill9-*"))
    env = {**os.environ, "PYTHONPATH": str(Path(spec.__file__).resolve().parents[1])}
    run = subprocess.Popen([sys.executable, "-m", "flagbench", "build", str(exp), "-q"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    odir = None
    try:
        end = time.monotonic() + 600
        while time.monotonic() < end:   # until make is compiling (CC lines in its log)
            made = [d for d in set(trees.glob("debian-6.1*/out/kill9-*")) - before]
            logs = [d / "default--x86_64--gcc" / "flagbench-make.log" for d in made]
            if logs and logs[0].is_file() and logs[0].read_text(errors="replace").count("  CC ") >= 10:
                odir = logs[0].parent
                break
            assert run.poll() is None, run.stderr.read()
            time.sleep(0.2)
        assert odir is not None, "make never started compiling"
        assert _in_dir(odir)
        run.kill()
        run.wait()
        end = time.monotonic() + 30
        while _in_dir(odir) and time.monotonic() < end:
            time.sleep(0.1)
        assert not _in_dir(odir)                      # the whole Kbuild tree died with flagbench
        again = subprocess.run([sys.executable, "-m", "flagbench", "build", str(exp), "--format", "json", "-q"],
                               env=env, capture_output=True, text=True, timeout=1800)
        assert again.returncode == 0, again.stderr
        cell, = json.loads(again.stdout)["cells"]
        assert cell["ok"] and Path(cell["vmlinux"]).is_file()
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for d in set(trees.glob("debian-6.1*/out/kill9-*")) - before:
            shutil.rmtree(d, ignore_errors=True)


STALE = """
import os, signal, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from flagbench import procs
with procs.start(["/bin/sh", "-c", "sleep 120 & echo $! > " + sys.argv[2] + "; wait"]):
    while not os.path.exists(sys.argv[2]) or not open(sys.argv[2]).read().strip():
        pass
    procs.record_owner(Path(sys.argv[3]))          # as a build in that cell records itself
    os.kill(procs.watchdog_pid(), signal.SIGKILL)   # its watchdog died too: nothing ended the build
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_build_a_dead_flagbench_left_in_the_cell_is_ended_first(kernels, tmp_path):
    """The next run finds the stale build of its cell (its owner recorded beside the O= directory)
    and ends it before using the directory."""
    odir = kernels["default"].dir
    pidfile = tmp_path / "pid"
    dead = subprocess.run([sys.executable, "-c", STALE, str(Path(spec.__file__).resolve().parents[1]),
                           str(pidfile), str(odir.with_name(odir.name + ".owner"))], timeout=120)
    assert dead.returncode == -9
    stale = int(pidfile.read_text())
    try:
        assert os.path.exists(f"/proc/{stale}")
        again = build_test_kernels(("default",))["default"]
        assert again.ok and again.cached
        state = Path(f"/proc/{stale}/stat").read_text().rsplit(")", 1)[1].split()[0] \
            if os.path.exists(f"/proc/{stale}") else "gone"
        assert state in ("gone", "Z")
    finally:
        if os.path.exists(f"/proc/{stale}"):
            os.kill(stale, 9)
