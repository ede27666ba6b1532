"""Objects between two commits: `size --objects` and `bisect --objects` on ref variants.

A commit's kernel build is kept without its objects (the walked O= directory moves on), so
it keeps each compiled object's code size and hash; `size --objects` between two commits
reads those and names the object that changed, where it used to print "0" silently. Object
bisection, which relinks A's objects, builds each commit in a checkout and O= of its own.

The kernel path runs on a stand-in kernel tree (a git repository whose Makefile answers
Kbuild's targets with gcc: two compiled objects with their .cmd files, linked into vmlinux):
no Linux build. The code index itself is checked on the suite's test kernels (slow, shared).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import flagbench, write_experiment
from flagbench.errors import UserError
from flagbench.size import objects
from kernel_util import STAND_IN_KBUILD
from test_bisect import _git

MAKEFILE = STAND_IN_KBUILD + """\tmkdir -p $(O)/lib
\t$(CC) -O2 -c lib/f.c -o $(O)/lib/f.o
\techo 'savedcmd_lib/f.o := $(CC) -O2 -c -o lib/f.o lib/f.c' > $(O)/lib/.f.o.cmd
\t$(CC) -O2 -c lib/g.c -o $(O)/lib/g.o
\techo 'savedcmd_lib/g.o := $(CC) -O2 -c -o lib/g.o lib/g.c' > $(O)/lib/.g.o.cmd
\t$(MAKE) vmlinux
.PHONY: vmlinux
vmlinux:
\tcd $(O) && rm -f vmlinux.a && ar cDPrST vmlinux.a lib/f.o lib/g.o && ld -r -o vmlinux lib/f.o lib/g.o
\t: > $(O)/System.map
"""
F_C = "int f(int x);\nint f(int x) {{\n{body}    return x;\n}}\n"
G_C = "int g(int x);\nint g(int x) { return x * 3; }\n"


def _kernel_experiment(tmp_path: Path) -> Path:
    """The stand-in tree at base and at HEAD (f grows), and an experiment a = base, b = HEAD."""
    src = tmp_path / "linux"
    (src / "lib").mkdir(parents=True)
    (src / "Makefile").write_text(MAKEFILE)
    (src / "Kconfig").write_text("")
    (src / "lib" / "f.c").write_text(F_C.format(body="    x = x * 7 + 1;\n"))
    (src / "lib" / "g.c").write_text(G_C)
    _git(src, "init", "-q", "-b", "main")
    _git(src, "add", ".")
    _git(src, "commit", "-qm", "base")
    _git(src, "tag", "base")
    (src / "lib" / "f.c").write_text(F_C.format(body="    x = x * 7 + 1;\n    x = (x << 3) ^ (x >> 2);\n" * 4))
    _git(src, "commit", "-qam", "lib/f: more work")
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "experiment.toml").write_text(f'name = "k"\ntargets = ["x86_64"]\n[kernel]\nsource = "{src}"\n'
                                         'config = "tinyconfig"\n[variants]\na = { ref = "base" }\n'
                                         'b = { ref = "HEAD" }\n')
    return exp


def test_size_objects_between_two_commits_names_the_changed_object(tmp_path):
    exp = _kernel_experiment(tmp_path)
    done = flagbench("size", exp, "--variants", "a,b", "--objects", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "objects whose code changed: 1 of 2" in done.stdout, done.stdout   # before: "0", silently
    row = next(ln for ln in done.stdout.splitlines() if ln.startswith("lib/f.o"))
    old, new = map(int, row.split()[1:3])
    assert new > old
    # object bisection between the commits: each built in a checkout and O= of its own, A's
    # relinked with B's lib/f.o by the tree's own make (before: "no vmlinux.a (... 5.19 or later)")
    bisect = flagbench("bisect", exp, "--objects", "a", "b", "--metric", "size", cache=tmp_path / "cache")
    assert bisect.returncode == 0, bisect.stderr
    lines = bisect.stdout.splitlines()
    assert lines[1] == f"all 1 differing objects of b in a: {new - old:+,.2f}", lines
    assert lines[2].startswith("lib/f.o carries 100 % of the"), lines
    assert "relinking" in bisect.stderr and all(len(line) <= 100 for line in lines)


def test_a_build_without_objects_is_refused_never_counted_as_no_change(tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "vmlinux").write_bytes(b"\x7fELF")
    (kept / "flagbench-cell.json").write_text(json.dumps({"ok": True, "commit": {"sha": "ab" * 20}}))
    with pytest.raises(UserError, match="kept without its objects' code"):
        objects.compare_trees(kept, kept)
    (kept / "flagbench-cell.json").unlink()
    with pytest.raises(UserError, match="not a Kbuild O= directory"):
        objects.compare_trees(kept, kept)


def test_c_ref_variants_bisect_to_the_object_that_changed(tmp_path):
    repo = tmp_path / "repo"
    write_experiment(repo, 'sources = ["f.c", "g.c"]\n[variants]\na = { ref = "base" }\nb = { ref = "HEAD" }\n',
                     {"f.c": F_C.format(body=""), "g.c": G_C})
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    _git(repo, "tag", "base")
    (repo / "f.c").write_text(F_C.format(body="    x = (x << 3) ^ (x >> 2);\n" * 6))
    _git(repo, "commit", "-qam", "f: more work")
    done = flagbench("bisect", repo, "--objects", "a", "b", "--metric", "size", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "all 1 differing objects of b in a" in done.stdout and "f.o carries 100 %" in done.stdout, done.stdout
    assert all(len(line) <= 100 for line in done.stdout.splitlines())
    # size --objects is a kernel's: for C, one true line
    size = flagbench("size", repo, "--variants", "a,b", "--objects", cache=tmp_path / "cache")
    assert size.returncode == 2 and "go with a kernel experiment" in size.stderr


@pytest.mark.slow     # the suite's test kernels (shared, cached): cold, a tinyconfig build and a patch
def test_the_kept_code_index_compares_as_the_objects_do(tmp_path):
    from kernel_util import build_test_kernels
    kernels = build_test_kernels(("default", "patched"))
    a, b = kernels["default"], kernels["patched"]
    assert a.ok and b.ok
    direct, total = objects.compare(a.dir, b.dir)
    kept = {}
    for name, k in (("a", a), ("b", b)):
        kept[name] = tmp_path / name
        kept[name].mkdir()
        objects.write_code_index(k.dir, kept[name] / objects.CODE_INDEX)
    assert objects.compare(kept["a"], kept["b"]) == (direct, total)
    assert "lib/string.o" in [c.path for c in direct] and total > 100
