"""The one ELF reader's C loops (`flagbench.elf._symtab`) on bad arguments and on files with more
sections than a section header index holds (SHN_XINDEX), and the readers outside `flagbench.elf`
that go through it (size/objects.py)."""
from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from elf_util import DATA, Layout, compile_object, with_field
from flagbench import elf
from flagbench.elf import _symtab, sections, tables
from flagbench.elf.constants import SHT_SYMTAB
from flagbench.errors import UserError
from flagbench.size.objects import code_of

# More sections than 0xff00 (SHN_LORESERVE): indices from there on live in SHT_SYMTAB_SHNDX.
MANY = 65400


@pytest.fixture(scope="module")
def obj(tmp_path_factory):
    d = tmp_path_factory.mktemp("reader")
    (d / "split.c").write_text("".join(f"int f{i}(int x) {{ return x * {i + 3} + {i}; }}\n"
                                       f"const char r{i}[{300 + i}] = {{ {i} }};\n" for i in range(40)))
    out = compile_object("x86_64", "gcc", d / "split.c", d / "split.o",
                         ["-ffunction-sections", "-fdata-sections", "-g"])
    assert out is not None
    return out


def member_view(path):
    inp = elf.open_input(str(path))
    m = inp.members[0]
    hdrs = sections.read_headers(inp, m)
    view = sections.view(inp, m, hdrs, sections.section_name_table(inp, m, hdrs), sections.symtab_index(hdrs))
    inp.close()
    return m, view


def test_section_sizes_refuses_bad_groups_with_an_exception(obj):
    """Bad groups used to come back as NULL with no exception set (SystemError) or went unchecked."""
    _, view = member_view(obj)

    class NoTruth:
        def __bool__(self):
            raise RuntimeError("no truth value")

    with pytest.raises(TypeError, match="groups"):
        _symtab.section_sizes(view, [(b".text", ".text", True)])          # a list, not a tuple
    with pytest.raises(TypeError, match="groups"):
        _symtab.section_sizes(view, (("text", ".text", True),))           # str prefix, not bytes
    with pytest.raises(RuntimeError, match="no truth value"):
        _symtab.section_sizes(view, ((b".text", ".text", NoTruth()),))
    sizes = _symtab.section_sizes(view, ((b".text", ".text", True),))[0]
    assert sizes[".text"] > 0 and not any(k.startswith(".text.") for k in sizes)


def test_section_sizes_does_not_leak_per_merged_section(obj):
    """Every .rodata.rN merges into .rodata: once a PyLong leaked per merged section (sizes
    over 256: small ints are shared, so a leak of those would not show)."""
    _, view = member_view(obj)
    with elf.Image(obj) as image:
        assert sum(1 for s in image.sections if s.name.startswith(".rodata.r") and s.size > 256) >= 40
    groups = ((b".rodata", ".rodata", True),)
    for _ in range(10):
        _symtab.section_sizes(view, groups)
    before = sys.getallocatedblocks()
    for _ in range(200):
        _symtab.section_sizes(view, groups)
    assert sys.getallocatedblocks() - before < 50      # 200 x 40 leaked objects before


def test_symbols_checks_its_rules(obj):
    m, view = member_view(obj)
    good = tables.rules(m.machine)
    assert _symtab.symbols(view, good, full=False)[0]
    with pytest.raises(TypeError):
        _symtab.symbols(view, good._replace(common=("x",)))            # PyLong_AsLong went unchecked
    with pytest.raises(ValueError, match="4096"):
        _symtab.symbols(view, good._replace(letters=b"\0" * 10))
    with pytest.raises(TypeError, match="Summary"):
        _symtab.symbols(view, good, summaries=("not a summary",))
    with pytest.raises(TypeError):
        _symtab.symbols(view, good, 1, 2)                                # options are keywords only

    def named(code):
        return good._replace(name_code=lambda t, f, n: code)

    # .comment and friends: sections whose name decides, asked of name_code
    with pytest.raises(TypeError):
        _symtab.symbols(view, named("t"))
    with pytest.raises(ValueError, match="out of range"):
        _symtab.symbols(view, named(99))
    with pytest.raises(TypeError, match="View"):
        _symtab.entries((b"", b""))


def test_symbol_name_past_the_string_table_is_one_line_in_both_readers(tmp_path, obj):
    """A symbol's name offset past its string table: the same check and message for the nm
    listing (`size`) and for every entry (`asm`, Image)."""
    data = obj.read_bytes()
    lay = Layout(data)
    symtab = lay.section(SHT_SYMTAB)
    strtab = lay.get(data, symtab, "link")
    bad = tmp_path / "names.o"
    bad.write_bytes(with_field(data, strtab, "size", 1))
    message = r"names\.o: corrupt ELF \(symbol name offset \d+ past the string table, size 1\)"
    with pytest.raises(UserError, match=message):
        elf.sized_symbols(bad)
    with pytest.raises(UserError, match=message):
        elf.Image(bad)


@pytest.fixture(scope="module")
def many_sections(tmp_path_factory):
    """An object of MANY + 3 sections made by gas from a generated assembly file: function fI in
    section .text.fI, I + 1 .. 3 bytes long, and one data object after them all."""
    d = tmp_path_factory.mktemp("xindex")
    src = d / "many.s"
    with open(src, "w") as f:
        for i in range(MANY):
            f.write(f'.section .text.f{i},"ax",@progbits\n.globl f{i}\n.type f{i},@function\n'
                    f"f{i}:\n.skip {1 + i % 3}, 0x90\n.size f{i}, {1 + i % 3}\n")
        f.write(".data\n.globl last_data\n.type last_data,@object\nlast_data: .long 1\n.size last_data, 4\n")
    out = d / "many.o"
    subprocess.run(["as", "-o", str(out), str(src)], check=True)
    return out


@pytest.mark.slow
def test_image_resolves_extended_section_indices(many_sections):
    """Symbols in sections 0xff00 and above carry SHN_XINDEX; their section is in SHT_SYMTAB_SHNDX.
    Image used to give them section 0, as if undefined."""
    with elf.Image(many_sections) as image:
        assert len(image.sections) > 0xFF00
        funcs = [s for s in image.symbols if s.name.startswith("f") and s.type == 2]
        assert len(funcs) == MANY
        high = [s for s in funcs if s.shndx >= 0xFF00]
        assert len(high) > 100
        assert all(image.sections[s.shndx].name == f".text.{s.name}" for s in funcs)
        assert all(s.size == 1 + int(s.name[1:]) % 3 for s in funcs)
        data = next(s for s in image.symbols if s.name == "last_data")
        assert image.sections[data.shndx].name == ".data"
    nm = subprocess.run(["nm", "--size-sort", str(many_sections)], capture_output=True, text=True,
                        check=True).stdout.split("\n")
    want = sorted((p[2], p[1], int(p[0], 16)) for p in (line.split() for line in nm) if len(p) == 3)
    assert sorted(elf.sized_symbols(many_sections)) == want


def test_code_of_reads_through_the_elf_reader(tmp_path, obj):
    """size/objects.code_of: the executable sections' total and hash, against readelf's
    section table; not ELF is (0, ""); a damaged object is one UserError naming it."""
    out = subprocess.run(["readelf", "-SW", str(obj)], capture_output=True, text=True, check=True).stdout
    data = obj.read_bytes()
    total, h = 0, hashlib.sha256()
    for line in out.splitlines():
        p = line.replace("[ ", "[").split()
        if len(p) >= 8 and p[0].startswith("[") and p[0][1:-1].isdigit() and "X" in p[7] and p[2] != "NOBITS":
            off, size = int(p[4], 16), int(p[5], 16)
            total += size
            h.update(data[off:off + size])
    assert total > 0
    assert code_of(obj) == (total, h.hexdigest())
    text = tmp_path / "bitcode.o"
    text.write_bytes(b"BC\xc0\xde not ELF")
    assert code_of(text) == (0, "")
    cut = tmp_path / "cut.o"
    cut.write_bytes(data[:Layout(data).shoff + 10])
    with pytest.raises(UserError, match="cut.o: truncated"):
        code_of(cut)


def test_is_elf(tmp_path, obj):
    import os
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert elf.is_elf(obj) and not elf.is_elf(DATA / "kinds.c") and not elf.is_elf(fifo)
    assert not elf.is_elf(tmp_path / "missing")
