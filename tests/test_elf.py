"""The one ELF reader (`flagbench.elf`): what it lists against binutils, and one clear line for
every damaged or unreadable input, from the reader and from the verbs that use it."""
from __future__ import annotations

import os
import subprocess

import pytest

from conftest import flagbench
from elf_util import DATA, Layout, compile_object, objects, run_verb, with_field, with_shstrndx
from flagbench import elf
from flagbench.elf.constants import SHT_STRTAB, SHT_SYMTAB
from flagbench.errors import UserError


@pytest.fixture(scope="module")
def objs(tmp_path_factory):
    return objects(tmp_path_factory.mktemp("objs"))


def one_line_error(r, *words):
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def readelf_symbols(path):
    """(name, value, size) of the symbols readelf lists in a section (not section or file symbols)."""
    out = subprocess.run(["readelf", "-sW", str(path)], capture_output=True, text=True, check=True).stdout
    rows = set()
    for line in out.splitlines():
        p = line.split(None, 7)
        if len(p) == 8 and p[0][:-1].isdigit() and p[6] not in ("UND", "COM", "ABS") and p[3] not in ("SECTION", "FILE"):
            rows.add((p[7], int(p[1], 16), int(p[2], 0)))
    return rows


def test_image_symbols_and_sections_match_readelf(objs):
    assert "x86_64" in objs
    for target, obj in objs.items():
        with elf.Image(obj) as image:
            mine = {(s.name, s.value, s.size) for s in image.symbols
                    if s.shndx and s.name and s.type not in (3, 4)}
            names = [s.name for s in image.sections]
        want = readelf_symbols(obj)
        if target == "arm":   # readelf shows the Thumb bit in the value, as the file holds it
            want = {(n, v & ~1 if (n, v & ~1, s) in mine else v, s) for n, v, s in want}
        assert mine == want, target
        assert ".symtab" in names and ".strtab" in names


def test_symbol_address_is_nms(tmp_path):
    src = tmp_path / "main.c"
    src.write_text("int helper(int x) { return x * 7; }\nint main(void) { return helper(3); }\n")
    exe = tmp_path / "prog"
    subprocess.run(["gcc", "-O1", "-static", str(src), "-o", str(exe)], check=True)
    nm = subprocess.run(["nm", "--defined-only", "-P", str(exe)], capture_output=True, text=True).stdout
    want = {p[0]: int(p[2], 16) for p in (line.split() for line in nm.splitlines()) if len(p) >= 3}
    for name in ("main", "helper", "memcpy"):
        assert elf.symbol_address(exe, name) == want[name]
    assert elf.symbol_address(exe, "no_such_symbol") is None


def test_sized_symbols_of_an_archive_name_every_member(tmp_path, objs):
    arch = tmp_path / "lib.a"
    subprocess.run(["ar", "rcs", str(arch), str(objs["x86_64"])], check=True)
    assert elf.sized_symbols(arch) == elf.sized_symbols(objs["x86_64"])
    with elf.open_input(str(arch)) as inp:
        assert [m.name for m in inp.members] == [f"{arch}(x86_64.o)"]


def test_not_regular_files_are_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, what in ((fifo, "a FIFO"), ("/dev/null", "a character device"), (tmp_path, "a directory")):
        with pytest.raises(UserError, match="not a"):
            elf.open_input(str(path))
        with pytest.raises(UserError, match=what.split()[-1]):
            elf.Image(str(path))


def damaged(objs, tmp_path):
    """(name, bytes, what the error says) for each damage the reader must catch."""
    data = objs["x86_64"].read_bytes()
    lay = Layout(data)
    symtab, strtab = lay.section(SHT_SYMTAB), lay.get(data, lay.section(SHT_SYMTAB), "link")
    return [
        ("link", with_field(data, symtab, "link", 0xFFFF), "string table"),
        ("link0", with_field(data, symtab, "link", 0), "string table"),
        ("link-self", with_field(data, symtab, "link", symtab), "string table"),
        ("shstrndx", with_shstrndx(data, lay.shnum + 3), "section name table"),
        ("shstrndx-symtab", with_shstrndx(data, symtab), "string table"),
        ("symtab-offset", with_field(data, symtab, "offset", 1 << 40), "past the end"),
        ("strtab-size", with_field(data, strtab, "size", 1 << 62), "past the end"),
        ("strtab-offset-huge", with_field(data, strtab, "offset", (1 << 64) - 16), "past the end"),
        ("name", with_field(data, 1, "name", 0xFFFFFF), "section name"),
        ("cut", data[:lay.shoff + 10], "truncated"),
    ]


def test_damaged_headers_are_one_line_in_the_reader_and_both_verbs(tmp_path, objs):
    good = objs["x86_64"]
    assert Layout(good.read_bytes()).types[Layout(good.read_bytes()).shstrndx] == SHT_STRTAB
    for name, data, words in damaged(objs, tmp_path):
        bad = tmp_path / f"{name}.o"
        bad.write_bytes(data)
        with pytest.raises(UserError, match=words):
            elf.Image(bad).close()
        for argv in (("size", "--format=bom", bad, good), ("size", bad, good), ("asm", bad, good),
                     ("asm", good, bad)):
            rc, out, err = run_verb(argv)
            one_line_error(subprocess.CompletedProcess(argv, rc, out, err), f"{name}.o")


def test_asm_and_size_refuse_a_fifo(tmp_path, objs):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for argv in (("size", fifo, objs["x86_64"]), ("asm", fifo, objs["x86_64"]), ("asm", objs["x86_64"], fifo)):
        one_line_error(flagbench(*argv, timeout=60), "fifo", "not a regular file")


def test_asm_refuses_an_archive(tmp_path, objs):
    arch = tmp_path / "lib.a"
    subprocess.run(["ar", "rcs", str(arch), str(objs["x86_64"])], check=True)
    one_line_error(flagbench("asm", arch, objs["x86_64"]), "lib.a", "archive")


def test_a_large_file_is_not_read_whole(tmp_path, objs):
    """A file far larger than its tables (sparse: 8 GB of nothing after an object) is opened,
    listed and compared reading only the tables; a whole-file read would need 8 GB."""
    big = tmp_path / "big.o"
    big.write_bytes(objs["x86_64"].read_bytes())
    with open(big, "r+b") as f:
        f.truncate(8 << 30)
    import resource
    code = ("import resource, sys; from flagbench import elf; "
            f"elf.sized_symbols({str(big)!r}); elf.Image({str(big)!r}).close(); "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    r = subprocess.run([os.sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(r.stdout) < 1 << 20, r.stdout        # KB: well under 1 GB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 1 << 21
    r = flagbench("size", "--format=bom", big, objs["x86_64"])
    assert r.returncode == 0, r.stderr
    assert r.stdout.endswith("chg +0.00%\n")


def test_compile_helper_skips_missing_compilers(tmp_path):
    assert compile_object("x86_64", "gcc", DATA / "kinds.c", tmp_path / "k.o") is not None
