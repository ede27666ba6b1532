"""Choosing and building the two cells a pair-comparing verb (asm, size) looks at."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import write_experiment
from flagbench import build, spec
from flagbench.errors import UserError
from flagbench.cli import is_experiment
from flagbench.subject import pair
from flagbench.variants import choose, parse_variants

MATRIX = """
sources = ["f.c"]
targets = ["x86_64", "aarch64", "loongarch64"]
compilers = ["gcc", "clang"]
[variants]
base = {}
fast = { cflags = ["-O3"] }
small = { cflags = ["-Os"] }
"""


@pytest.fixture(autouse=True)
def cache(object_cache):
    return object_cache


def experiment(tmp_path, toml: str, source: str = "int f(int x) { return x * 7; }\n"):
    return write_experiment(tmp_path, toml, {"f.c": source})


def test_defaults_are_the_first_two_variants_on_the_first_buildable_pair(tmp_path):
    exp = spec.load(experiment(tmp_path, MATRIX))
    old, new, notes = choose(exp)
    assert (old.key, new.key) == ("base/x86_64/gcc", "fast/x86_64/gcc")
    # what else there was, and how to choose it; loongarch64/gcc cannot be built so is not offered
    assert notes == ["comparing on x86_64/gcc; also in the experiment: x86_64/clang, aarch64/gcc, "
                     "aarch64/clang, loongarch64/clang (--target, --compiler)",
                     "comparing variants base and fast; also: small (--variants A,B)"]


def test_target_compiler_and_variants_choose_the_cells(tmp_path):
    exp = spec.load(experiment(tmp_path, MATRIX))
    old, new, _ = choose(exp, "small,base", target="loongarch64")
    assert (old.key, new.key) == ("small/loongarch64/clang", "base/loongarch64/clang")
    old, new, _ = choose(exp, ["fast", "small"], target="aarch64", compiler="clang")
    assert (old.key, new.key) == ("fast/aarch64/clang", "small/aarch64/clang")


def test_short_form_has_nothing_to_note(tmp_path):
    exp = spec.load(experiment(tmp_path, """
        sources = ["f.c"]
        [variants]
        a = {}
        b = { defines = { X = 1 } }
    """))
    old, new, notes = choose(exp)
    assert (old.key, new.key, notes) == ("a/x86_64/gcc", "b/x86_64/gcc", [])


@pytest.mark.parametrize("kwargs, message", [
    ({"variants": "base,nope"}, "no variant 'nope' (variants: base, fast, small)"),
    ({"variants": "base"}, "--variants takes two variant names"),
    ({"variants": "base,fast,small"}, "--variants takes two variant names"),
    ({"target": "riscv64"}, "target 'riscv64' is not in the experiment (targets: x86_64, aarch64, loongarch64)"),
    ({"target": "vax"}, "target 'vax' is not in the experiment"),
    ({"target": "loongarch64", "compiler": "gcc"}, "gcc cannot build loongarch64: no gcc for loongarch64"),
    ({"compiler": "icc"}, "compiler 'icc' is not in the experiment for x86_64 (compilers: gcc, clang)"),
])
def test_bad_choices_say_what_there_is(tmp_path, kwargs, message):
    exp = spec.load(experiment(tmp_path, MATRIX))
    with pytest.raises(UserError) as e:
        choose(exp, **kwargs)
    assert message in str(e.value)


def test_one_variant_has_nothing_to_compare(tmp_path):
    exp = spec.load(experiment(tmp_path, 'sources = ["f.c"]\n[variants]\nonly = {}\n'))
    with pytest.raises(UserError, match="only one variant"):
        choose(exp)


def test_pair_builds_both_cells_then_hits_the_cache(tmp_path):
    root = experiment(tmp_path, """
        sources = ["f.c", "g.c"]
        [variants]
        a = {}
        b = { defines = { SCALE = 9 } }
    """, "#ifndef SCALE\n#define SCALE 7\n#endif\nint f(int x) { return x * SCALE; }\n")
    (tmp_path / "g.c").write_text("int g(int x) { return x + 1; }\n")
    old, new, notes, _ = pair(root)
    assert (old.cell.key, new.cell.key, notes) == ("a/x86_64/gcc", "b/x86_64/gcc", [])
    assert [o.name for o in old.objects] == [o.name for o in new.objects] == ["f.o", "g.o"]
    assert all(o.is_file() for o in old.objects + new.objects)
    assert "-DSCALE=9" in new.cflags and "-DSCALE=9" not in old.cflags
    # the objects differ where the define does: f's constant, not g
    assert old.objects[0].read_bytes() != new.objects[0].read_bytes()
    assert not old.cached and not new.cached
    again = pair(root / "experiment.toml", "a,b")
    assert again.old.cached and again.new.cached and again.old.dir == old.dir


def test_same_variant_twice_builds_once(tmp_path):
    root = experiment(tmp_path, 'sources = ["f.c"]\n[variants]\na = {}\nb = {}\n')
    old, new, _, _ = pair(root, "b,b")
    assert old is new


def test_what_counts_as_an_experiment(tmp_path):
    experiment(tmp_path, 'sources = ["f.c"]\n[variants]\na = {}\n')
    assert is_experiment(tmp_path) and is_experiment(tmp_path / "experiment.toml")
    assert not is_experiment(tmp_path / "f.o")
    assert parse_variants(None) is None and parse_variants(" a , b ") == ("a", "b")


def test_cli_bad_choice_is_one_line_exit_2(tmp_path):
    root = experiment(tmp_path, MATRIX)
    env = {**os.environ, build.CACHE_ENV: str(tmp_path / "cache")}
    for args, message in [(["--target", "hppa"], "target 'hppa' is not in the experiment"),
                          (["--variants", "base,slow"], "no variant 'slow'"),
                          (["--compiler", "gcc", "--target", "loongarch64"], "gcc cannot build loongarch64")]:
        out = subprocess.run([sys.executable, "-m", "flagbench", "asm", str(root), *args],
                             capture_output=True, text=True, env=env)
        assert out.returncode == 2, (args, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and message in out.stderr, out.stderr
