"""Variant builds with real compilers: every target, content caching (a second build
runs no compiler), flag probing, compiler errors, missing compilers, and the
harness runtime linked and run on every runnable target."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import flagbench
from conftest import write_experiment as experiment
from flagbench import build, spec
from flagbench.run import harness
from flagbench.errors import UserError

# e_machine and ELF class (1: 32-bit, 2: 64-bit) from elf.h, per target.
ELF_MACHINE = {"x86_64": (62, 2), "aarch64": (183, 2), "arm": (40, 1), "riscv64": (243, 2),
               "loongarch64": (258, 2), "hppa": (15, 1), "hppa64": (15, 2)}
QEMU = {"aarch64": "qemu-aarch64", "arm": "qemu-arm", "riscv64": "qemu-riscv64",
        "loongarch64": "qemu-loongarch64", "hppa": "qemu-hppa"}

HARNESS = r"""
#include "fbrt.h"
uint64_t sum_squares(uint64_t n);
int main(int argc, char **argv)
{
	char buf[16];
	uint64_t t0 = fb_now_ns();
	memset(buf, 'x', sizeof buf);
	memcpy(buf, argv[1], 5);
	fb_puts("start\n");
	fb_print("argc", (uint64_t)argc);
	fb_print("sum", sum_squares(10));
	fb_print("same", (uint64_t)(memcmp(buf, "hellox", 6) == 0));
	fb_print("clock", (uint64_t)(fb_now_ns() >= t0));
	fb_exit(7);
}
"""
WORK = "unsigned long long sum_squares(unsigned long long n)\n" \
       "{ unsigned long long s = 0; for (unsigned long long i = 1; i <= n; i++) s += i * i; return s; }\n"
HARNESS_OUTPUT = "start\nargc 2\nsum 385\nsame 1\nclock 1\n"   # 1+4+9+...+100 = 385


@pytest.fixture(autouse=True)
def cache(object_cache):
    return object_cache


def elf_machine(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF"
    return int.from_bytes(head[18:20], "little" if head[5] == 1 else "big"), head[4]


def nm_names(path: Path, nm: str = "nm") -> set[str]:
    out = subprocess.run([nm, str(path)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


def counting_gcc(dir: Path) -> tuple[Path, Path]:
    """A real gcc behind a script that logs each invocation (one line per run)."""
    log = dir / "cc.log"
    script = dir / "countgcc"
    script.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec gcc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, log


def test_all_seven_targets_build_objects_for_their_machine(tmp_path):
    d = experiment(tmp_path / "seven", """
        sources = ["a.c", "b.S"]
        targets = ["x86_64", "aarch64", "arm", "riscv64", "loongarch64", "hppa", "hppa64"]
        [variants]
        v = {}
        """, {"a.c": "#include <stdint.h>\nuint32_t a_fn(uint32_t x) { return x * 3; }\n",
              "b.S": "#ifdef __hppa__\n\t.level 1.1\n#endif\n\t.data\n\t.globl b_data\nb_data:\n\t.byte 1\n"})
    builds = build.build(spec.load(d))
    assert [b.cell.key for b in builds] == [f"v/{t}/{'clang' if t == 'loongarch64' else 'gcc'}"
                                            for t in ELF_MACHINE]
    for b in builds:
        assert [o.name for o in b.objects] == ["a.o", "b.o"]
        assert b.dir.is_dir() and all(o.parent == b.dir for o in b.objects)
        for o in b.objects:
            assert elf_machine(o) == ELF_MACHINE[b.cell.target], b.cell.key
        assert "a_fn" in nm_names(b.objects[0]) and "b_data" in nm_names(b.objects[1])
        assert all(b.tools.values()) and not b.cached
    by_target = {b.cell.target: b for b in builds}
    assert by_target["loongarch64"].cflags[:2] == ("-mno-lsx", "-nostdlibinc")
    assert by_target["hppa64"].tools["hppa64-linux-gnu-gcc"].startswith("hppa64-linux-gnu-gcc")
    assert "clang version 19" in by_target["loongarch64"].tools["clang-19"]
    assert json.loads((by_target["arm"].dir / "build.json").read_text())["cell"] == "v/arm/gcc"


def test_variant_flags_defines_and_sources_reach_the_compiler(tmp_path):
    d = experiment(tmp_path / "v", """
        sources = ["a.c"]
        [variants]
        base = {}
        big = { defines = { BIG = 1 } }
        alt = { sources = ["alt.c"] }
        """, {"a.c": "#ifdef BIG\nint big_table[1000];\n#endif\nint a_fn(void) { return 1; }\n",
              "alt.c": "int alt_fn(void) { return 2; }\n"})
    base, big, alt = build.build(spec.load(d))
    assert "big_table" not in nm_names(base.objects[0])
    assert "big_table" in nm_names(big.objects[0]) and "-DBIG=1" in big.cflags
    assert [o.name for o in alt.objects] == ["alt.o"] and "alt_fn" in nm_names(alt.objects[0])
    assert len({base.dir, big.dir, alt.dir}) == 3


def test_second_build_runs_no_compiler(tmp_path, cache):
    cc, log = counting_gcc(tmp_path)
    d = experiment(tmp_path / "c", f"""
        sources = ["a.c", "b.c"]
        compilers = ["{cc}"]
        [variants]
        default = {{}}
        o3 = {{ cflags = ["-O3"], optional_cflags = ["-fno-such-flag"] }}
        """, {"a.c": "int a_fn(int x) { return x + 1; }\n", "b.c": "int b_fn(int x) { return x - 1; }\n"})
    first = build.build(spec.load(d))
    assert not any(b.cached for b in first)
    calls = log.read_text().splitlines()
    assert sum(" -c a.c " in c or " -c b.c " in c for c in calls) == 4          # 2 variants x 2 sources
    mtimes = {o: o.stat().st_mtime_ns for b in first for o in b.objects}

    out = flagbench("build", d, "--format", "json", cache=cache)              # a fresh process
    assert out.returncode == 0, out.stderr
    assert log.read_text().splitlines() == calls                              # not even --version
    cells = json.loads(out.stdout)["cells"]
    assert [c["cached"] for c in cells] == [True, True]
    assert [c["dir"] for c in cells] == [str(b.dir) for b in first]
    assert {o: o.stat().st_mtime_ns for b in first for o in b.objects} == mtimes

    (d / "b.c").write_text("int b_fn(int x) { return x - 2; }\n")            # one source changes
    third = build.build(spec.load(d))
    new_calls = log.read_text().splitlines()[len(calls):]
    assert sorted(c.split(" -c ")[1].split()[0] for c in new_calls) == ["b.c", "b.c"]
    for new, old in zip(third, first):
        assert new.dir != old.dir and not new.cached                        # a new cell directory...
        assert new.objects[0].samefile(old.objects[0])                      # ...sharing the cached a.o


def test_two_processes_build_the_same_experiment_at_once(tmp_path, cache):
    d = experiment(tmp_path / "p", """
        sources = ["a.c", "b.c", "c.c"]
        targets = ["x86_64", "aarch64"]
        [variants]
        a = {}
        b = { cflags = ["-Os"] }
        """, {f"{n}.c": f"int {n}_fn(int x) {{ return x * {i + 2}; }}\n" for i, n in enumerate("abc")})
    env = {**os.environ, build.CACHE_ENV: str(cache)}
    argv = [sys.executable, "-m", "flagbench", "build", str(d), "--format", "json", "-q"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    outs = [p.communicate() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    dirs = [[c["dir"] for c in json.loads(o)["cells"]] for o, _ in outs]
    assert dirs[0] == dirs[1] and len(set(dirs[0])) == 4
    for cell_dir in map(Path, dirs[0]):
        assert sorted(p.name for p in cell_dir.iterdir()) == ["a.o", "b.o", "build.json", "c.o"]
    leftovers = [p for p in cache.rglob(".tmp-*")]
    assert leftovers == []


def test_rejected_flag_names_variant_compiler_target_and_message(tmp_path):
    d = experiment(tmp_path / "f", """
        sources = ["a.c"]
        [variants]
        default = {}
        strict = { cflags = ["-mstrict-align"] }
        """)
    with pytest.raises(UserError) as e:
        build.build(spec.load(d))
    msg = str(e.value)
    assert msg.startswith("variant strict: gcc for x86_64 rejects its flags: ")
    assert "unrecognized command-line option" in msg and "-mstrict-align" in msg


def test_clang_rejects_a_flag_for_the_wrong_target(tmp_path):
    d = experiment(tmp_path / "f", """
        sources = ["a.c"]
        compilers = ["clang"]
        [variants]
        strict = { cflags = ["-mstrict-align"] }
        """)
    with pytest.raises(UserError, match=r"variant strict: clang \(clang-19 --target=x86_64-linux-gnu\) for x86_64 "
                                        r"rejects its flags: .*'-mstrict-align'"):
        build.build(spec.load(d))


def test_optional_flags_are_dropped_with_a_note_where_rejected(tmp_path):
    d = experiment(tmp_path / "o", """
        sources = ["a.c"]
        targets = ["x86_64", "aarch64"]
        [variants]
        default = {}
        strict = { optional_cflags = ["-mstrict-align", "-Wno-frobnicate"] }
        """)
    notes: list[str] = []
    builds = {b.cell.key: b for b in build.build(spec.load(d), notes=notes)}
    assert builds["strict/aarch64/gcc"].cflags == ("-O2", "-mstrict-align")
    assert builds["strict/x86_64/gcc"].cflags == ("-O2",)
    assert len(notes) == 3
    assert notes[0].startswith("variant strict: gcc for x86_64 rejects optional -mstrict-align, dropped (")
    # gcc takes any -Wno-foo silently; the probe asks for -Wfoo, like Kbuild's cc-disable-warning
    assert sum("rejects optional -Wno-frobnicate" in n for n in notes) == 2


def test_warning_flags_do_not_fail_the_probe(tmp_path):
    d = experiment(tmp_path / "w", """
        sources = ["a.c"]
        compilers = ["gcc", "clang"]
        cflags = ["-O2", "-Wall", "-Wextra", "-Wpedantic", "-Wmissing-prototypes"]
        [variants]
        v = {}
        """)
    assert [b.cflags[-1] for b in build.build(spec.load(d))] == ["-Wmissing-prototypes"] * 2


def test_a_source_that_does_not_compile_shows_the_compiler_error(tmp_path):
    d = experiment(tmp_path / "s", """
        sources = ["good.c", "bad.c"]
        [variants]
        v = {}
        """, {"good.c": "int good(void) { return 0; }\n",
              "bad.c": "int bad(void)\n{\n\treturn undeclared_thing;\n}\n"})
    with pytest.raises(UserError) as e:
        build.build(spec.load(d))
    msg = str(e.value)
    assert msg.startswith("bad.c does not compile for v/x86_64/gcc: bad.c:3:")
    assert "error: 'undeclared_thing' undeclared" in msg


def test_a_missing_compiler_says_what_to_install(tmp_path, cache):
    d = experiment(tmp_path / "m", """
        sources = ["a.c"]
        compilers = ["gcc", "gcc-99"]
        [variants]
        v = {}
        """)
    exp = spec.load(d)
    with pytest.raises(UserError, match=r"^gcc-99 is not installed \(needed for x86_64/gcc-99\): "
                                        r"apt-get install gcc-99$"):
        build.build(exp)
    notes: list[str] = []
    assert [b.cell.key for b in build.build(exp, skip_missing=True, notes=notes)] == ["v/x86_64/gcc"]
    assert notes == ["skipped x86_64/gcc-99: gcc-99 is not installed (needed for x86_64/gcc-99): "
                     "apt-get install gcc-99"]
    out = flagbench("build", d, cache=cache)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "apt-get install gcc-99" in out.stderr


@pytest.mark.parametrize("toml, words", [
    ('sources = ["a.c"]\ntargets = ["sparc"]\n[variants]\nv = {}\n', "experiment.toml:2: unknown target 'sparc'"),
    ('sources = ["a.c"]\n[variants]\nv = { cflags = ["-O2" }\n', "experiment.toml:3:"),
])
def test_cli_bad_experiment_is_one_line_exit_2(tmp_path, cache, toml, words):
    d = experiment(tmp_path / "e", toml)
    out = flagbench("build", d, cache=cache)
    assert out.returncode == 2
    assert out.stderr.startswith("flagbench build: ") and out.stderr.count("\n") == 1
    assert words in out.stderr and "Traceback" not in out.stderr


def test_cli_text_output_and_progress(tmp_path, cache):
    d = experiment(tmp_path / "t", """
        sources = ["a.c"]
        targets = ["hppa"]
        compilers = ["gcc", "clang"]
        [variants]
        v = {}
        """)
    first = flagbench("build", d, cache=cache)
    assert first.returncode == 0, first.stderr
    assert "flagbench build: cc v/hppa/gcc a.c" in first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("v/hppa/gcc  built   ") and lines[1].split() == ["objects", "a.o"]
    assert "  tool    hppa-linux-gnu-gcc: hppa-linux-gnu-gcc (Debian" in first.stdout   # labelled: the stats line also starts "ccache:"
    assert lines[-1] == "note: skipped hppa/clang: clang has no hppa backend"
    again = flagbench("build", d, cache=cache)
    assert again.stdout.splitlines()[0].startswith("v/hppa/gcc  cached  ")
    assert "cc v/hppa/gcc" not in again.stderr


RUNNABLE = [("x86_64", "gcc"), ("x86_64", "clang"), ("aarch64", "gcc"), ("aarch64", "clang"), ("arm", "gcc"),
            ("arm", "clang"), ("riscv64", "gcc"), ("riscv64", "clang"), ("loongarch64", "clang"), ("hppa", "gcc")]


@pytest.mark.parametrize("target, compiler", RUNNABLE, ids=[f"{t}-{c}" for t, c in RUNNABLE])
def test_harness_links_statically_and_runs(tmp_path, target, compiler):
    (tmp_path / "harness.c").write_text(HARNESS)
    (tmp_path / "work.c").write_text(WORK)
    out = tmp_path / "out"
    objects = build.compile_sources(target, compiler, [tmp_path / "harness.c", tmp_path / "work.c"],
                                    ["-O2"], out)
    assert [o.name for o in objects] == ["harness.o", "work.o"] and all(o.parent == out for o in objects)
    exe = harness.link_executable(target, compiler, objects, out / "harness")
    assert elf_machine(exe) == ELF_MACHINE[target]
    runner = [QEMU[target]] if target in QEMU else []
    run = subprocess.run([*runner, str(exe), "hello"], capture_output=True, text=True, timeout=60, env={})
    assert (run.returncode, run.stdout) == (7, HARNESS_OUTPUT), run.stderr
    interp = subprocess.run(["readelf", "-l", str(exe)], capture_output=True, text=True).stdout
    assert "INTERP" not in interp                                  # static: no dynamic loader
    (linker, version), = harness.link_tool_versions(target, compiler).items()
    assert linker.endswith("ld.lld-19" if compiler == "clang" else "ld")
    assert ("LLD 19" if compiler == "clang" else "GNU ld") in version


def test_freestanding_runtime_runs_natively(tmp_path):
    """The loongarch64 runtime's _start and syscalls, checked on the host too."""
    (tmp_path / "harness.c").write_text(HARNESS)
    (tmp_path / "work.c").write_text(WORK)
    objects = build.compile_sources("x86_64", "gcc", [tmp_path / "harness.c", tmp_path / "work.c",
                                                      build.HARNESS_DIR / "fbrt_freestanding.c"],
                                    ["-O2", "-ffreestanding", "-fno-builtin", "-fno-stack-protector"])
    exe = tmp_path / "free"
    subprocess.run(["gcc", "-nostdlib", "-static", "-o", str(exe), *map(str, objects)], check=True)
    assert "GLIBC" not in subprocess.run(["strings", str(exe)], capture_output=True, text=True).stdout
    run = subprocess.run([str(exe), "hello"], capture_output=True, text=True, timeout=60, env={})
    assert (run.returncode, run.stdout) == (7, HARNESS_OUTPUT)


def test_hppa64_builds_objects_but_does_not_link(tmp_path):
    objects = build.compile_sources("hppa64", "gcc", [_write(tmp_path / "w.c", WORK)], ["-O2"])
    assert elf_machine(objects[0]) == (15, 2)
    with pytest.raises(UserError, match="hppa64: objects only"):
        harness.link_executable("hppa64", "gcc", objects, tmp_path / "x")


def test_link_error_is_the_linkers_line(tmp_path):
    obj = build.compile_sources("x86_64", "gcc", [_write(tmp_path / "m.c", "int nowhere(void);\n"
                                                         "int main(void) { return nowhere(); }\n")], ["-O2"])
    with pytest.raises(UserError, match=r"linking x for x86_64/gcc failed: .*undefined reference to `nowhere'"):
        harness.link_executable("x86_64", "gcc", obj, tmp_path / "x")
    assert not (tmp_path / "x").exists()


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_tools_are_installed():
    for tool in ("gcc", "clang-19", "ld.lld-19", "aarch64-linux-gnu-gcc", "arm-linux-gnueabihf-gcc",
                 "riscv64-linux-gnu-gcc", "hppa-linux-gnu-gcc", "hppa64-linux-gnu-gcc", *QEMU.values()):
        assert shutil.which(tool), f"{tool} missing: run scripts/install-deps"
