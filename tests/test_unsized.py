"""The code outside sized symbols as `flagbench size` finds it: `asm.unsized.of_member`, whose holes
are found and their padding counted in C (`_symtab.code_holes`), and for a linked x86-64 file
the sums the C reader makes itself (`_symtab.scan_pair`), against their Python model (the walk
of `asm.unsized.code_map`), on objects of every target and linked programs whose code, symbol
addresses, sizes and names are rewritten at random; and the C function's arguments."""
from __future__ import annotations

import os
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest

from elf_util import FLAVOURS, code_maps, compile_object, size_sums
from flagbench import elf
from flagbench.asm import unsized
from flagbench.elf import _symtab, sections, tables
from flagbench.elf.constants import SHT_SYMTAB

# hypothesis keeps caches in .hypothesis/ of the working directory: not in the checkout
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "flagbench-hypothesis"))
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

# x86's padding spellings (asm.unsized._X86_NOP), some cut short or wrongly prefixed, and other code
X86 = [b"\xcc", b"\x00", b"\x90", b"\x66\x90", b"\x66\x66\x90", b"\x2e\x66\x90", b"\x0f\x1f\x00", b"\x0f\x1f\x40\x00",
       b"\x0f\x1f\x44\x00\x00", b"\x66\x0f\x1f\x44\x00\x00", b"\x0f\x1f\x80\x00\x00\x00\x00",
       b"\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00", b"\x66\x66\x2e\x0f\x1f\x84\x00\x00\x00\x00\x00",
       b"\x8d\x76\x00", b"\x8d\xb4\x26\x00\x00\x00\x00", b"\x8d\x74\x26\x00", b"\x8d\xb6\x00\x00\x00\x00",
       b"\x87\xdb", b"\x87\xc9", b"\x0f\x1f", b"\x66", b"\x2e", b"\x8d", b"\x87", b"\x0f\x1f\x84\x00", b"\xc3",
       b"\x0f\x1f\x40", b"\x0f\x1f\x44\x00", b"\x0f\x1f\x80\x00\x00\x00", b"\x66\x0f\x1f\x84\x00\x00\x00\x00",
       b"\x8d\x76", b"\x8d\x74\x26", b"\x8d\xb4\x26\x00\x00\x00", b"\x8d\xb6\x00\x00\x00"]
# names a symbol is given (its length kept): stub symbols, mapping symbols, .L labels, newlines
NAMES = ("__{}_veneer", "__{}_from_thumb", "__{}_change_to_arm", "__{}_from_arm_veneer", "__x\n{}_veneer",
         "$x{}", "$x.{}", "$d{}", "$xrv{}", ".L{}", "{}\n", "$t\n{}")


def alphabet(target: str) -> list[bytes]:
    if target == "x86_64":
        return X86
    granule, tokens = unsized._tokens(target)
    return list(tokens) + [t[:1] for t in tokens] + [b"\x00", b"\x13\x00\x00\x00", b"\x01\x00"]


# functions of varied length and name length (long enough to be renamed into every pattern, or 3)
SOURCE = "".join(f"int {'function_' + 'n' * (i % 9) if i % 6 else 'f'}_{i}(int x) {{ int s = x; "
                 f"for (int i = 0; i < {i % 4}; i++) s = s * {i + 3} + i; return s ^ {i}; }}\n" for i in range(24))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, bytes]:
    """target -> an object of SOURCE; "sections": one with a section per function (offsets in
    each); "linked": a program linked from it (addresses, not offsets); "dynamic": one linked
    with the C library's shared object (PLT sections)."""
    d = tmp_path_factory.mktemp("unsized")
    (d / "f.c").write_text(SOURCE)
    out = {}
    for target, compiler in FLAVOURS:
        obj = compile_object(target, compiler, d / "f.c", d / f"{target}.o")
        if obj is not None:
            out[target] = obj.read_bytes()
    obj = compile_object("x86_64", "gcc", d / "f.c", d / "sections.o", ["-ffunction-sections"])
    assert obj is not None
    out["sections"] = obj.read_bytes()
    prog = d / "prog"
    subprocess.run(["gcc", "-O2", "-nostdlib", "-static", "-Wl,-e,f_0", str(d / "f.c"), "-o", str(prog)],
                   check=True, capture_output=True)
    out["linked"] = prog.read_bytes()
    (d / "main.c").write_text('#include <stdio.h>\nint main(int c, char **v) { puts(v[0]); return printf("%d", c); }\n')
    subprocess.run(["gcc", "-O2", str(d / "f.c"), str(d / "main.c"), "-o", str(d / "dynamic")], check=True,
                   capture_output=True)
    out["dynamic"] = (d / "dynamic").read_bytes()
    return out


def sums_agree(path) -> None:
    """`flagbench size`'s sums of PATH's code outside sized symbols are the Python model's."""
    fast, in_c, model = size_sums(path)
    assert fast == model


def rewritten(data: bytes, code: bytes | None, edits) -> bytes:
    """DATA with every executable section's bytes CODE repeated (None: as they are), and per
    EDITS (symbol, anchor, offset, size, name pattern) a symbol of such a section moved to the
    anchor symbol's address plus the offset (anchor None: to the offset), resized and renamed (a
    pattern past NAMES: the name kept)."""
    path = tempfile.mktemp()
    with open(path, "wb") as f:
        f.write(data)
    inp = elf.open_input(path)
    m = inp.members[0]
    hdrs = sections.read_headers(inp, m)
    inp.close()
    os.unlink(path)
    out = bytearray(data)
    code_sections = [i for i in range(1, len(hdrs)) if hdrs.flags[i] & 6 == 6 and hdrs.type[i] == 1]
    for i in code_sections if code else ():
        size = hdrs.size[i]
        out[hdrs.offset[i]:hdrs.offset[i] + size] = (code * (size // len(code) + 1))[:size]
    symtab = hdrs.type.index(SHT_SYMTAB)
    entsize, e = (24, ">" if m.big else "<") if m.is64 else (16, ">" if m.big else "<")
    value_size = "QQ" if m.is64 else "II"
    at_value = 8 if m.is64 else 4
    shndx_at = 6 if m.is64 else 14
    strtab = hdrs.offset[hdrs.link[symtab]]
    entries = [hdrs.offset[symtab] + k * entsize for k in range(1, hdrs.size[symtab] // entsize)]
    ours = [at for at in entries if struct.unpack_from(e + "H", out, at + shndx_at)[0] in code_sections
            and out[at + (4 if m.is64 else 12)] & 0xF != 3]   # not the section symbols
    values = [struct.unpack_from(e + value_size[0], out, at + at_value)[0] for at in ours]
    for k, anchor, offset, size, pattern in edits if ours else ():
        at = ours[k % len(ours)]
        value = offset if anchor is None else max(0, values[anchor % len(ours)] + offset)
        struct.pack_into(e + value_size, out, at + at_value, value, size)
        name = strtab + struct.unpack_from(e + "I", out, at)[0]
        length = out.index(b"\0", name) - name
        if pattern < len(NAMES) and length >= len(NAMES[pattern]) - 2:
            out[name:name + length] = NAMES[pattern].format("f" * (length - len(NAMES[pattern]) + 2)).encode()
    return bytes(out)


EDITS = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 200),
                           st.integers(-24, 24) | st.sampled_from([-4096, 4096, 1 << 20]), st.integers(0, 80),
                           st.integers(0, 15)), max_size=8)


@pytest.mark.parametrize("target", [t for t, _ in FLAVOURS] + ["sections", "linked", "dynamic"])
@settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_c_hole_finder_agrees_with_its_python_model(tmp_path, inputs, target, data):
    if target not in inputs:
        pytest.skip(f"no compiler for {target} here")
    atoms = alphabet("x86_64" if target in ("sections", "linked", "dynamic") else target)
    code = b"".join(data.draw(st.lists(st.sampled_from(atoms), min_size=1, max_size=40), label="code"))
    path = tmp_path / "x.o"
    path.write_bytes(rewritten(inputs[target], code, data.draw(EDITS, label="edits")))
    for c, model in code_maps(path):
        assert c == model
    if target in ("linked", "dynamic"):
        sums_agree(path)


@pytest.mark.parametrize("pattern", range(len(NAMES)), ids=[n.format("f").replace("\n", "NL") for n in NAMES])
def test_every_name_rule_agrees(tmp_path, inputs, pattern):
    """Every symbol renamed to the pattern where its name is long enough, every other one made
    a label at the address of the one before, the pair moved into the padding after it: the real
    code, cut at names of each kind, twice at some addresses."""
    for target in ("x86_64", "aarch64", "arm", "sections", "linked", "dynamic"):
        if target not in inputs:
            continue
        for move in (0, 3, 6):
            path = tmp_path / f"{target}-{move}"
            path.write_bytes(rewritten(inputs[target], None, [(k, k - k % 2, move, 0 if k % 2 else 12, pattern)
                                                               for k in range(24)]))
            for c, model in code_maps(path):
                assert c == model, (target, move)
            if target in ("linked", "dynamic"):
                sums_agree(path)


def gaps_model(path) -> tuple:
    """The padding after each listed symbol as `_symtab.symbols` documents it: code symbols by
    section, start, longest first and symbol order (the C code sorts them by place and symbol
    order only); the bytes from the furthest end of the sized ones so far to the next start (or
    the section's end) go to the one that reached furthest."""
    inp = elf.open_input(str(path))
    m = inp.members[0]
    t = tables.read_member(inp, m, full=True)
    hdrs = sections.read_headers(inp, m)
    inp.close()
    spans = []
    for k, (value, size, sec) in enumerate(zip(t.values, t.sizes, t.sections)):
        if 0 < sec < len(hdrs) and hdrs.flags[sec] & 6 == 6:
            addr, end_sec = (0 if m.etype == 1 else hdrs.addr[sec]), hdrs.size[sec]
            start = min(end_sec, value if m.etype == 1 else max(0, value - addr))
            spans.append((sec, start, -min(end_sec, start + size), k))
    spans.sort()
    gaps, covered, padding = [0] * len(t.sizes), 0, 0
    for i, (sec, start, minus_end, k) in enumerate(spans):
        end = -minus_end
        if i == 0 or spans[i - 1][0] != sec:
            reach, owner = 0, None
        covered += max(0, end - max(start, reach))
        if end > start and end >= reach:
            reach, owner = end, k
        if reach > start and owner is not None:
            following = spans[i + 1][1] if i + 1 < len(spans) and spans[i + 1][0] == sec else hdrs.size[sec]
            if following > reach:
                gaps[owner] += following - reach
                padding += following - reach
    return (t.gaps, t.covered, t.padding), (gaps, covered, padding)


def test_the_padding_after_symbols_that_start_together(tmp_path, inputs):
    """Symbols moved to start where others do, sized or not, shorter or longer, in any symbol
    order: the padding after each is the documented rule's, whatever order those starting
    together are walked in."""
    for target in ("x86_64", "sections", "linked"):
        for move, size in ((0, 0), (0, 12), (0, 200), (3, 40)):
            path = tmp_path / f"{target}-{move}-{size}"
            edits = [(k, k - k % 3, move, size * (k % 3), 99) for k in range(24)]
            path.write_bytes(rewritten(inputs[target], None, edits))
            c, model = gaps_model(path)
            assert c == model, (target, move, size)


def test_every_x86_spelling_whole_and_cut_short(tmp_path, inputs):
    """Code that is one spelling (or one cut short) and int3 over and over: the holes' bytes are
    padding, or not, as the regex has it."""
    for target in ("x86_64", "linked"):
        for code in X86:
            for tail in (b"", b"\xcc", b"\xcc\xcc\xcc"):
                path = tmp_path / target
                path.write_bytes(rewritten(inputs[target], code + tail, ()))
                (c, model), = code_maps(path)
                assert c == model, (target, code + tail)
                if target == "linked":
                    sums_agree(path)


def _x86_object(tmp_path, inputs) -> tuple[bytes, Path, int]:
    """The x86_64 test object's bytes, a copy of it to rewrite, and its .text's size."""
    data = inputs["x86_64"]
    path = tmp_path / "x.o"
    path.write_bytes(data)
    inp = elf.open_input(str(path))
    hdrs = sections.read_headers(inp, inp.members[0])
    size = hdrs.size[sections.names(inp, inp.members[0], hdrs).index(".text")]
    inp.close()
    return data, path, size


def test_holes_are_tested_joined_first(tmp_path, inputs):
    """asm.unsized._count_padding: the holes no label or stub symbol marks (one lies between a
    hole's start and the next one's) are tested joined before one by one, so a hole that is
    padding only with the next one's bytes counts as padding: here 0f 1f, then 00 after a
    function (nopl (%rax) joined), with int3 at a label between them."""
    data, path, size = _x86_object(tmp_path, inputs)
    code = bytes(10) + b"\x0f\x1f" + bytes(8) + b"\xcc" + bytes(9) + b"\x00" + bytes(size - 31)
    # [0,10) [12,20) [21,30) [31,end) sized, a label at 20; the other symbols in the last
    edits = [(0, None, 0, 10, 99), (1, None, 12, 8, 99), (2, None, 20, 0, 99), (3, None, 21, 9, 99)]
    edits += [(k, None, 31, size - 31, 99) for k in range(4, 24)]
    path.write_bytes(rewritten(data, code, edits))
    (c, model), = code_maps(path)
    assert c == model
    assert dict(c[0])["padding"] == 4 and dict(c[0])["other"] == 0


def test_a_join_across_a_run_of_prefixes(tmp_path, inputs):
    """A hole that ends in 66/2e prefixes may be padding with the next hole's bytes: the C code
    joins the holes then (a hole whose walk stopped with eight bytes to spare past the prefixes
    needs no join): 66 2e six times, then 0f 1f 00 after a function, one 15-byte NOP."""
    data, path, size = _x86_object(tmp_path, inputs)
    code = bytes(10) + b"\x66\x2e" * 6 + bytes(8) + b"\x0f\x1f\x00" + bytes(size - 33)
    # [0,10) [22,30) [33,end) sized: holes [10,22) and [30,33)
    edits = [(0, None, 0, 10, 99), (1, None, 22, 8, 99)] + [(k, None, 33, size - 33, 99) for k in range(2, 24)]
    path.write_bytes(rewritten(data, code, edits))
    (c, model), = code_maps(path)
    assert c == model
    assert dict(c[0])["padding"] == 15 and dict(c[0])["other"] == 0


def _x86_text(inputs, tmp_path):
    """The x86_64 object's member, View, .text index and .text bytes."""
    path = tmp_path / "x.o"
    path.write_bytes(inputs["x86_64"])
    inp = elf.open_input(str(path))
    m = inp.members[0]
    hdrs, view = tables.member_view(inp, m)
    text = sections.names(inp, m, hdrs).index(".text")
    data = inp.read(*sections.table_range(m, hdrs, text, "text"))
    inp.close()
    return m, view, text, data


def test_a_padding_run_of_fill_length_is_fill(inputs, tmp_path):
    """A hole of FILL bytes of padding is alignment fill; one byte less is padding."""
    m, view, text, _ = _x86_text(inputs, tmp_path)
    for size, want in ((unsized.FILL, (0, unsized.FILL, [])), (unsized.FILL - 1, (unsized.FILL - 1, 0, []))):
        far = ((text, 1 << 40, size),)   # past every symbol: one hole
        assert _symtab.code_holes(view, tables.rules(m.machine), far, unsized._padding_spec("x86_64"),
                                  lambda i: b"\xcc" * size, True) == want


def test_the_real_inputs_agree(inputs, tmp_path):
    """As compiled and linked: most holes padding, counted without a piece; the linked programs'
    sums made by the C reader itself, the dynamic one's PLT stubs too."""
    for target, data in inputs.items():
        path = tmp_path / target
        path.write_bytes(data)
        (c, model), = code_maps(path)
        assert c == model, target
        if target in ("x86_64", "linked"):   # one section per function: no padding between
            assert c[1] and dict(c[1])["padding"] > 0, target
        if target in ("linked", "dynamic"):
            fast, in_c, model = size_sums(path)
            assert fast == model and in_c, target
            assert fast["padding"] > 0 and (fast["stubs"] > 0) == (target == "dynamic"), target


def test_a_code_section_ending_past_2_64_is_walked_in_python(inputs, tmp_path):
    """Past C's 64-bit integers (a damaged file): the Python walk, the same answer as before."""
    data = inputs["linked"]
    path = tmp_path / "prog"
    path.write_bytes(data)
    inp = elf.open_input(str(path))
    hdrs = sections.read_headers(inp, inp.members[0])
    inp.close()
    text = sections.names(elf.open_input(str(path)), inp.members[0], hdrs).index(".text")
    path.write_bytes(_with_addr(data, text, (1 << 64) - 16))
    (c, model), = code_maps(path)
    assert c == model
    fast, in_c, model = size_sums(path)
    assert fast == model and not in_c


def _with_addr(data: bytes, index: int, value: int) -> bytes:
    """DATA with section INDEX's sh_addr set (an ELF64 file: elf_util's fields have no addr)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    out = bytearray(data)
    struct.pack_into("<Q", out, shoff + index * 64 + 16, value)
    return bytes(out)


def test_code_holes_refuses_bad_arguments(inputs, tmp_path):
    m, view, text, data = _x86_text(inputs, tmp_path)
    rules, spec = tables.rules(m.machine), unsized._padding_spec("x86_64")

    def holes(scan=((text, 0, len(data)),), spec=spec, read=lambda i: data, count=True):
        return _symtab.code_holes(view, rules, scan, spec, read, count)

    padding, fill, left = holes()
    assert padding > 0 and fill == 0 and isinstance(left, list)
    assert holes(scan=()) == (0, 0, [])
    with pytest.raises(ValueError, match="section table"):
        holes(scan=((10_000, 0, 16),))
    with pytest.raises(ValueError, match="twice"):
        holes(scan=((text, 0, 16), (text, 0, 16)))
    with pytest.raises(TypeError, match="index, base, size"):
        holes(scan=([text, 0, 16],))
    with pytest.raises(ValueError, match="2\\^64"):
        holes(scan=((text, (1 << 64) - 8, 16),))
    with pytest.raises(TypeError):
        holes(scan=((text, 0),))
    with pytest.raises(ValueError, match="GRANULE"):
        holes(spec=(b"\0", 4, b"\0\0", 4096))
    with pytest.raises(TypeError, match="read"):
        holes(read=lambda i: "not bytes")
    with pytest.raises(ZeroDivisionError):
        holes(read=lambda i: 1 // 0)
    assert holes(read=lambda i: 1 // 0, count=False)[:2] == (0, 0)   # nothing is read without counting


@pytest.mark.parametrize("run", [255, 256, 257, 263, 264, 511, 512, 513, 4095, 4096, 4097])
def test_a_long_run_of_one_fill_byte(run):
    """A long run of int3 (the C code reads one 256 bytes at a time) ended by the end, by another
    fill byte, a NOP or code, or with another fill byte inside it: as long as the regex's match."""
    regex, spec = unsized._padding_regex("x86_64"), unsized._padding_spec("x86_64")
    for tail in (b"", b"\x90", b"\x90" * 300, b"\xc3", b"\x66\x90", b"\xcc\xc3", b"\x00" + b"\xcc" * 300 + b"\xc3"):
        raw = b"\xcc" * run + tail
        assert _symtab.padding_prefix(spec, raw) == regex.match(raw).end(), (run, tail[:4])


def test_the_c_code_spells_the_rules_as_asm_unsized():
    """The rules both spell: the stub symbols' endings, the PLT sections' names, x86's padding."""
    assert _symtab.STUB_SUFFIXES == tuple(s.encode() for s in unsized._STUB_SUFFIXES)
    assert set(_symtab.PLT_NAMES) == {n.encode() for n in unsized._PLT_NAMES}
    assert _symtab.PLT_RELOCS == tuple(n.encode() for n in unsized._PLT_RELOCS)
    assert _symtab.X86_PADDING == unsized._padding_spec("x86_64")


@pytest.mark.parametrize("target", ["x86_64", "aarch64", "arm", "riscv64", "loongarch64", "hppa"])
@settings(max_examples=300, deadline=None, database=None)
@given(data=st.data())
def test_padding_prefix_is_the_regex_match(target, data):
    """`_symtab.padding_prefix` (what `flagbench size` cuts a hole's padding with, no `re`) takes
    as many bytes as the padding regex's match(): spellings, spellings cut short, other bytes."""
    atoms = alphabet(target)
    raw = b"".join(data.draw(st.lists(st.sampled_from(atoms), max_size=30), label="raw"))
    spec = unsized._padding_spec(target)
    assert _symtab.padding_prefix(spec, raw) == unsized._padding_regex(target).match(raw).end()
    assert (_symtab.padding_prefix(spec, raw) == len(raw)) == bool(unsized._padding_regex(target).fullmatch(raw))
