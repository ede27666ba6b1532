"""The experiment file: short and matrix forms, defaults, and every mistake reported
as FILE:LINE with what is wrong."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from flagbench import benchspec, spec
from flagbench.benchspec import MemoryBench
from flagbench.errors import UserError

CASES = Path(__file__).resolve().parent.parent / "cases"


def write(dir: Path, toml: str, sources=("a.c",)) -> Path:
    dir.mkdir(parents=True, exist_ok=True)
    for name in sources:
        (dir / name).write_text(f"int {Path(name).stem}_fn(void) {{ return 1; }}\n")
    (dir / "experiment.toml").write_text(textwrap.dedent(toml).lstrip("\n"))
    return dir


def error_of(dir: Path, toml: str, sources=("a.c",)) -> str:
    write(dir, toml, sources)
    with pytest.raises(UserError) as e:
        spec.load(dir)
    return str(e.value)


def test_short_form_two_variants_with_defaults(tmp_path):
    d = write(tmp_path / "strict", """
        sources = ["a.c"]
        [variants]
        default = {}
        strict = { cflags = ["-mstrict-align"] }
        """)
    exp = spec.load(d)
    assert exp.name == "strict"                       # the directory's name
    assert exp.path == d / "experiment.toml" and exp.root == d.resolve()
    assert exp.targets == ("x86_64",) and exp.cflags == ("-O2",) and exp.compilers is None
    assert [c.key for c in exp.cells()] == ["default/x86_64/gcc", "strict/x86_64/gcc"]
    assert exp.variants[0].name == "default"          # the first is the baseline
    assert exp.variant("strict").cflags == ("-mstrict-align",)
    assert exp.sources == ((d / "a.c").resolve(),)
    assert exp.notes == () and exp.benches == ()


def test_default_compiler_per_target(tmp_path):
    d = write(tmp_path / "e", """
        sources = ["a.c"]
        targets = ["loongarch64", "hppa64"]
        [variants]
        v = {}
        """)
    assert [c.key for c in spec.load(d).cells()] == ["v/loongarch64/clang", "v/hppa64/gcc"]


def test_matrix_skips_what_a_compiler_cannot_build(tmp_path):
    d = write(tmp_path / "m", """
        name = "matrix"
        sources = ["a.c"]
        targets = ["aarch64", "hppa", "loongarch64"]
        compilers = ["gcc", "clang"]
        [variants]
        a = {}
        b = { cflags = ["-O3"] }
        """)
    exp = spec.load(d)
    assert exp.name == "matrix"
    keys = [c.key for c in exp.cells()]
    assert keys == ["a/aarch64/gcc", "a/aarch64/clang", "a/hppa/gcc", "a/loongarch64/clang",
                    "b/aarch64/gcc", "b/aarch64/clang", "b/hppa/gcc", "b/loongarch64/clang"]
    assert exp.notes == ("skipped hppa/clang: clang has no hppa backend",
                         "skipped loongarch64/gcc: no gcc for loongarch64 in Debian; use clang")


def test_explicit_drivers_build_only_their_own_target(tmp_path):
    d = write(tmp_path / "e", """
        sources = ["a.c"]
        targets = ["x86_64", "aarch64"]
        compilers = ["gcc-12", "aarch64-linux-gnu-gcc-12", "clang-19"]
        [variants]
        v = {}
        """)
    exp = spec.load(d)
    assert [c.key for c in exp.cells()] == ["v/x86_64/gcc-12", "v/x86_64/clang-19", "v/aarch64/aarch64-linux-gnu-gcc-12",
                                            "v/aarch64/clang-19"]
    assert "skipped aarch64/gcc-12: gcc-12 compiles for x86_64 only" in exp.notes


def test_long_form_variant_and_target_tables(tmp_path):
    d = write(tmp_path / "long", """
        description = "templates"
        sources = ["a.c"]
        cflags = ["-O2", "-fno-builtin"]
        targets = ["x86_64", "loongarch64"]

        [variants.default]

        [variants.template]
        cflags = ["-O3"]
        optional_cflags = ["-mfoo"]
        defines = { USE_TEMPLATE = 1, NAME = "t", FLAG = true }
        sources = ["b.c"]

        [target.loongarch64]
        cflags = ["-mno-lsx"]
        optional_cflags = ["-mbar"]

        [[bench]]
        name = "copy"
        kind = "memcpy"
        functions = ["memcpy_template", "libc"]
        sizes = [32, 4096]
        """, sources=("a.c", "b.c"))
    exp = spec.load(d)
    t = exp.variant("template")
    assert exp.description == "templates" and exp.cflags == ("-O2", "-fno-builtin")
    assert t.cflags == ("-O3",) and t.optional_cflags == ("-mfoo",)
    assert t.define_flags() == ["-DUSE_TEMPLATE=1", "-DNAME=t", "-DFLAG=1"]
    assert t.sources == ((d / "b.c").resolve(),) and exp.variant("default").sources is None
    assert exp.target_cflags == {"loongarch64": ("-mno-lsx",)}
    assert exp.target_optional_cflags == {"loongarch64": ("-mbar",)}
    copy, = exp.benches
    assert isinstance(copy, MemoryBench) and copy.line == 18
    assert (copy.name, copy.kind, copy.functions, copy.sizes) == ("copy", "memcpy", ("memcpy_template", "libc"),
                                                                   (32, 4096))
    assert (copy.samples, copy.warmup, copy.timeout, copy.alignments) == (10, 1, 300.0, ((0, 0), (3, 1)))
    with pytest.raises(UserError, match="no variant 'nope'"):
        exp.variant("nope")


def test_a_toml_file_other_than_experiment_toml(tmp_path):
    write(tmp_path, 'sources = ["a.c"]\n[variants]\nv = {}\n')
    (tmp_path / "experiment.toml").rename(tmp_path / "other.toml")
    assert spec.load(tmp_path / "other.toml").name == "other"


# (file text, the line the error must name, words the message must contain)
BAD = {
    "toml syntax": ('sources = ["a.c"]\n[variants\n', "2:10", "Expected ']'"),
    "unterminated array": ('sources = ["a.c"]\ncflags = ["-O2",\n', "2", "end of file"),
    "unknown top key": ('sources = ["a.c"]\ntarget = "x86_64"\n[variants]\nv = {}\n', "2",
                        "[target] must be a table"),
    "typo at top": ('source = ["a.c"]\n[variants]\nv = {}\n', "1", "unknown key 'source'"),
    "typo in inline variant": ('sources = ["a.c"]\n[variants]\ndefault = {}\nstrict = { cflag = ["-x"] }\n',
                               "4", "unknown key 'cflag' in variant 'strict'"),
    "typo in variant table": ('sources = ["a.c"]\n[variants.a]\ncflags = []\n\n[variants.b]\ndefins = {}\n', "6",
                              "unknown key 'defins' in variant 'b'"),
    "wrong type": ('sources = ["a.c"]\ncflags = "-O2"\n[variants]\nv = {}\n', "2",
                   "cflags must be a list of strings"),
    "wrong type in variant": ('sources = ["a.c"]\n[variants]\nv = {}\nw = { cflags = [1] }\n', "4",
                              "cflags must be a list of strings"),
    "variant not a table": ('sources = ["a.c"]\n[variants]\nv = "-O3"\n', "3", "variant 'v' must be a table"),
    "unknown target": ('sources = ["a.c"]\n\ntargets = ["x86_64", "mips"]\n[variants]\nv = {}\n', "3",
                       "unknown target 'mips'"),
    "unknown target table": ('sources = ["a.c"]\n[variants]\nv = {}\n[target.sparc]\ncflags = []\n', "4",
                             "unknown target 'sparc'"),
    "variant with no name": ('sources = ["a.c"]\n[variants]\nv = {}\n"" = { cflags = ["-O3"] }\n', "4",
                             "a variant has no name"),
    "variant name with slash": ('sources = ["a.c"]\n[variants]\n"a/b" = {}\n', "3", "variant name 'a/b'"),
    "no variants": ('sources = ["a.c"]\n', "1", "missing [variants]"),
    "empty variants": ('sources = ["a.c"]\n[variants]\n', "2", "[variants] is empty"),
    "no sources": ('[variants]\nv = {}\n', "1", "missing sources"),
    "missing source": ('sources = ["a.c", "gone.c"]\n[variants]\nv = {}\n', "1", "source gone.c does not exist"),
    "not a C file": ('sources = ["a.py"]\n[variants]\nv = {}\n', "1", "not a C or assembly file"),
    "bench without kind": ('sources = ["a.c"]\n[variants]\nv = {}\n\n[[bench]]\nname = "x"\nkind = "micro"\n'
                           'function = "f"\n[[bench]]\nname = "y"\nfunction = "f"\n', "9", "bench 'y' has no kind"),
    "bench unknown kind": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "x"\nkind = "macro"\n', "6",
                           "unknown kind 'macro'"),
    "bench typo": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "x"\nkind = "micro"\nsamles = 3\n',
                   "7", "bench 'x': unknown key 'samles' for kind micro"),
    "bench without name": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nkind = "micro"\n', "4",
                           "[[bench]] without name"),
    "define false": ('sources = ["a.c"]\n[variants]\nv = { defines = { X = false } }\n', "3", "define X = false"),
    "no buildable pair": ('sources = ["a.c"]\ntargets = ["hppa"]\ncompilers = ["clang"]\n[variants]\nv = {}\n', "3",
                          "clang has no hppa backend"),
}


@pytest.mark.parametrize("case", BAD)
def test_mistakes_name_file_line_and_what(tmp_path, case):
    text, line, words = BAD[case]
    msg = error_of(tmp_path / "e", text)
    assert msg.startswith(f"{tmp_path / 'e' / 'experiment.toml'}:{line}: "), msg
    assert words in msg
    assert "\n" not in msg


def test_two_sources_with_one_object_name(tmp_path):
    msg = error_of(tmp_path, 'sources = ["a.c", "a.S"]\n[variants]\nv = {}\n', sources=("a.c", "a.S"))
    assert ":1: sources a.c and a.S would both make a.o" in msg


def test_hash_covers_the_file_sources_and_local_headers(tmp_path):
    d = write(tmp_path / "h", 'sources = ["a.c"]\n[variants]\nv = {}\n')
    (d / "a.c").write_text('#include "inc/a.h"\nint f(void) { return A; }\n')
    (d / "inc").mkdir()
    (d / "inc" / "a.h").write_text('#include "b.h"\n')
    (d / "inc" / "b.h").write_text("#define A 1\n")
    first = spec.load(d).hash
    assert spec.load(d).hash == first
    (d / "inc" / "b.h").write_text("#define A 2\n")            # a header included by a header
    second = spec.load(d).hash
    assert second != first
    (d / "a.c").write_text('#include "inc/a.h"\nint f(void) { return A + 1; }\n')
    third = spec.load(d).hash
    assert third not in (first, second)
    (d / "experiment.toml").write_text('sources = ["a.c"]\n[variants]\nw = {}\n')
    assert spec.load(d).hash not in (first, second, third)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(UserError, match="no such experiment file"):
        spec.load(tmp_path)
    with pytest.raises(UserError, match="no such experiment file"):
        spec.load(tmp_path / "x.toml")


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if (p / "experiment.toml").exists()))
def test_bundled_cases_load(case):
    exp = spec.load(CASES / case)
    assert exp.name == case and exp.cells()


# Issue 11: every bench key typed and range-checked in the file, at its line, before anything is built.
MICRO = 'sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "b"\nkind = "micro"\nfunction = "f"\n'
WIS = 'sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "w"\nkind = "wis"\ntestcase = "a.c"\n'
BAD_BENCH = {
    "samples text": (MICRO + 'samples = "abc"\n', "8", "samples must be a whole number, not 'abc'"),
    "samples fraction": (MICRO + 'samples = 2.7\n', "8", "samples must be a whole number, not 2.7"),
    "samples zero": (MICRO + 'samples = 0\n', "8", "samples = 0: must be at least 1"),
    "timeout text": (MICRO + 'timeout = "abc"\n', "8", "timeout must be a number of seconds"),
    "timeout zero": (MICRO + 'timeout = 0\n', "8", "timeout = 0: must be more than 0"),
    "timeout negative": (MICRO + 'timeout = -1\n', "8", "timeout = -1: must be more than 0"),
    "timeout nan": (MICRO + 'timeout = nan\n', "8", "timeout must be a number of seconds, not nan"),
    "warmup text": (MICRO + 'warmup = "x"\n', "8", "warmup must be a whole number"),
    "count_iters zero": (MICRO + 'count_iters = 0\n', "8", "count_iters = 0: must be at least 1"),
    "count_iters negative": (MICRO + 'count_iters = -5\n', "8", "count_iters = -5"),
    "metrics unknown": (MICRO + 'metrics = ["cycles"]\n', "8", "'cycles' is not one of time, insns, perf"),
    "bench target twice": (MICRO + 'targets = ["x86_64", "x86_64"]\n', "8", "targets names x86_64 twice"),
    "bench target not in experiment": (MICRO + 'targets = ["aarch64"]\n', "8", "not one of the experiment's"),
    "micro without function": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "b"\nkind = "micro"\n',
                               "4", "kind micro needs function"),
    "function not a C name": (MICRO.replace('"f"', '"f; rm"'), "7", "is not a C function name"),
    "wis tasks text": (WIS + 'tasks = ["abc"]\n', "8", "tasks must be a whole number, not 'abc'"),
    "wis tasks huge": (WIS + 'tasks = [100000000]\n', "8", "at most 1024"),
    "wis duration zero": (WIS + 'duration = 0\n', "8", "duration = 0: must be more than 0"),
    "wis duration fraction": (WIS + 'duration = 1.5\n', "8", "whole seconds"),
    "wis mode unknown": (WIS + 'modes = ["fibers"]\n', "8", "'fibers' is not one of processes, threads"),
    "wis timeout shorter than the run": (WIS + 'duration = 10\ntimeout = 5\n', "9", "not more than duration"),
    "wis testcase missing": (WIS.replace('testcase = "a.c"', 'testcase = "gone.c"'), "7", "no such C file"),
    "memcpy alignment": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "m"\nkind = "memcpy"\n'
                         'functions = ["f"]\nalignments = [[0, 64]]\n', "8", "pairs in 0..63"),
    "memcpy size": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "m"\nkind = "memcpy"\n'
                    'functions = ["f"]\nsizes = [0]\n', "8", "sizes = 0: must be at least 1"),
    "command empty": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "c"\nkind = "command"\n'
                      'command = []\n', "7", "command must be a non-empty list"),
    "guest not bool": (WIS + 'guest = "yes"\n', "8", "guest must be true or false"),
    "guest on micro": (MICRO + 'guest = true\n', "8", "unknown key 'guest' for kind micro"),
    "guest on memcpy": ('sources = ["a.c"]\n[variants]\nv = {}\n[[bench]]\nname = "m"\nkind = "memcpy"\n'
                        'functions = ["f"]\nguest = true\n', "8", "unknown key 'guest' for kind memcpy"),
    "layouts too many": (MICRO + 'layouts = 257\n', "8", "layouts = 257: must be at least 0 and at most 256"),
    "layout variant unknown": (MICRO + 'layouts = 2\nlayout_variants = ["w"]\n', "9", "names no variant 'w'"),
    "duplicate targets": ('sources = ["a.c"]\ntargets = ["x86_64", "x86_64"]\n[variants]\nv = {}\n', "2",
                          "targets names x86_64 twice"),
    "compiler by path and by name": ('sources = ["a.c"]\ncompilers = ["gcc", "/usr/bin/gcc"]\n[variants]\nv = {}\n',
                                     "2", "compilers names gcc twice"),
    "compiler with shell characters": ('sources = ["a.c"]\ncompilers = ["gcc;rm -rf x"]\n[variants]\nv = {}\n',
                                       "2", "compiler 'gcc;rm -rf x': a driver name or path"),
}


@pytest.mark.parametrize("case", BAD_BENCH)
def test_bad_bench_values_name_file_line_and_what(tmp_path, case):
    text, line, words = BAD_BENCH[case]
    msg = error_of(tmp_path / "e", text)
    assert msg.startswith(f"{tmp_path / 'e' / 'experiment.toml'}:{line}: "), msg
    assert words in msg, msg
    assert "\n" not in msg


def test_every_kind_has_its_defaults_in_one_place(tmp_path):
    d = write(tmp_path, MICRO + '\n[[bench]]\nname = "w"\nkind = "wis"\ntestcase = "a.c"\nguest = true\n'
              'samples = 3\n\n[[bench]]\nname = "c"\nkind = "command"\ncommand = ["true", "-x", "", "-x"]\n'
              'timeout = 2.5\n')
    micro, wis, command = spec.load(d).benches
    assert (type(micro), micro.samples, micro.warmup, micro.count_iters) == \
        (benchspec.MicroBench, 10, 1, 1000)
    assert (type(wis), wis.samples, wis.warmup, wis.tasks, wis.modes, wis.guest) == \
        (benchspec.WisBench, 3, 0, (1,), ("processes", "threads"), True)
    assert wis.testcase == (d / "a.c").resolve()
    assert (command.command, command.timeout, command.metrics) == (("true", "-x", "", "-x"), 2.5, ("time",))
    with pytest.raises(Exception):
        micro.samples = 5                                    # frozen
    assert benchspec.with_samples(micro, 4).samples == 4 and micro.samples == 10


# Experiment-file mistakes that were accepted and ignored, or found only after a build.
KERNEL = 'targets = ["x86_64"]\n[kernel]\nsource = "debian:6.1"\n'
GUEST = KERNEL + '[variants]\nv = {}\n[[bench]]\nname = "c"\nkind = "command"\nguest = true\n'
LATE = {
    "kernel variant cflags": (KERNEL + '[variants]\nv = {}\nw = { cflags = ["-O3"] }\n', "6",
                              "did you mean kcflags?"),
    "kernel variant defines": (KERNEL + '[variants]\nv = {}\nw = { defines = { X = 1 } }\n', "6",
                               "variant 'w': defines are for C sources"),
    "kernel top cflags": (KERNEL.replace("[kernel]", 'cflags = ["-O3"]\n[kernel]') + '[variants]\nv = {}\n', "2",
                          "did you mean kcflags?"),
    "kernel make CC a number": (KERNEL + 'make = { CC = 5 }\n[variants]\nv = {}\n', "4",
                                "make variable CC names a program: a string"),
    "variant make CC a number": (KERNEL + '[variants]\nv = {}\nw = { make = { CC = 5 } }\n', "6",
                                 "make variable CC names a program: a string"),
    "kernel make CC missing": (KERNEL + 'make = { CC = "no-such-cc-12" }\n[variants]\nv = {}\n', "4",
                               "make variable CC: no-such-cc-12 is not installed"),
    "kernel make table": (KERNEL + 'make = { V = [1] }\n[variants]\nv = {}\n', "4",
                          "make variable V must be a string or a number"),
    "define not an identifier": ('sources = ["a.c"]\n[variants]\nv = { defines = { "X Y" = 1 } }\n', "3",
                                 "define 'X Y': not a C identifier"),
    "define starting with a digit": ('sources = ["a.c"]\n[variants]\nv = { defines = { "1X" = 1 } }\n', "3",
                                     "define '1X': not a C identifier"),
    "define value with a newline": ('sources = ["a.c"]\n[variants]\nv = { defines = { X = "1\\n2" } }\n', "3",
                                    "define X: a value on one line"),
    "guest command missing": (GUEST + 'command = ["no-such-file.c"]\n', "10", "no-such-file.c does not exist"),
    "guest command not C": (GUEST + 'command = ["ls", "-l"]\n', "10", "a guest command is"),
    "guest wis testcase missing": (KERNEL + '[variants]\nv = {}\n[[bench]]\nname = "w"\nkind = "wis"\nguest = true\n'
                                   'testcase = "gone.c"\n', "10", "no such C file"),
    "micro without sources": ('[variants]\nv = {}\n[[bench]]\nname = "b"\nkind = "micro"\nfunction = "f"\n', "3",
                              "bench 'b' calls f: name the sources that define it"),
    "memcpy without sources": ('[variants]\nv = {}\n[[bench]]\nname = "m"\nkind = "memcpy"\n'
                               'functions = ["libc", "f"]\n', "3", "bench 'm' calls f"),
    "command of dir without sources": ('[variants]\nv = {}\n[[bench]]\nname = "c"\nkind = "command"\n'
                                       'command = ["ls", "{dir}"]\n', "3", "bench 'c' uses {dir}"),
}


@pytest.mark.parametrize("case", LATE)
def test_mistakes_found_before_anything_builds(tmp_path, case):
    text, line, words = LATE[case]
    msg = error_of(tmp_path / "e", text, sources=("a.c",) if "sources" in text else ())
    assert msg.startswith(f"{tmp_path / 'e' / 'experiment.toml'}:{line}: "), msg
    assert words in msg, msg
    assert "\n" not in msg


def test_sources_only_where_something_uses_them(tmp_path):
    """An A/A will-it-scale or command experiment compiles its own programs: no dummy C file."""
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "t.c").write_text("int t;\n")
    d = write(tmp_path / "e", '[variants]\na = {}\nb = {}\n[[bench]]\nname = "w"\nkind = "wis"\ntestcase = "t.c"\n'
              '[[bench]]\nname = "c"\nkind = "command"\ncommand = ["true", "{cflags}"]\n'
              '[[bench]]\nname = "m"\nkind = "memcpy"\nfunctions = ["libc"]\n', sources=())
    exp = spec.load(d)
    assert exp.sources == () and [b.name for b in exp.benches] == ["w", "c", "m"]
    kernel = write(tmp_path / "k", KERNEL + '[variants]\nv = {}\nw = { kcflags = ["-O3"] }\n', sources=())
    assert spec.load(kernel).variant("w").cflags == ()
    assert "missing sources" in error_of(tmp_path / "n", '[variants]\nv = {}\n', sources=())   # uses nothing
    from conftest import flagbench
    for verb in ("size", "asm"):
        done = flagbench(verb, d, cwd=tmp_path)
        assert done.returncode == 2 and "no sources, so no objects to compare" in done.stderr, done.stderr


def test_a_fifo_is_named_a_fifo(tmp_path):
    import os
    d = write(tmp_path / "e", 'sources = ["a.c", "f.c"]\n[variants]\nv = {}\n')
    os.mkfifo(d / "f.c")
    assert "source f.c is a FIFO, not a file" in error_of(d, (d / "experiment.toml").read_text())
    os.mkfifo(tmp_path / "x.toml")
    with pytest.raises(UserError, match=r"x.toml: is a FIFO, not a file"):
        spec.load(tmp_path / "x.toml")
    (tmp_path / "w").mkdir()
    os.mkfifo(tmp_path / "w" / "t.c")
    msg = error_of(tmp_path / "w", '[variants]\nv = {}\n[[bench]]\nname = "w"\nkind = "wis"\ntestcase = "t.c"\n',
                   sources=())
    assert ":6: " in msg and "t.c is a FIFO, not a file" in msg, msg
