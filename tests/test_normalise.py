"""The C normaliser (asm/_normalise.c) against the Python one it stands in for (asm/disasm.py:
`_blocks` and `Normaliser.body`), byte for byte: on objdump's output of real objects and
executables of all seven targets, of a linked x86-64 program with jump tables and rip-relative
data, of the vmlinux pair when it is here, and on bodies and streams made up to hit the edges
of each pattern the Python uses."""
from __future__ import annotations

import io
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from elf_util import FLAVOURS, compile_object
from flagbench.asm import _normalise, disasm, unsized
from flagbench.asm.disasm import Normaliser
from flagbench.asm.places import Places
from flagbench.toolchains import TARGETS, get_target

# hypothesis keeps caches in .hypothesis/ of the working directory: not in the checkout
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "flagbench-hypothesis"))
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

# A switch (a jump table), strings, globals read and written (rip-relative on x86-64), calls,
# a static function taken by address, a negative offset; memcpy, ext and puts are defined so
# that it links without a libc.
SOURCE = r"""
struct big { char b[200]; };
extern void ext(int);
extern int puts(const char *);
static int helper(int x) { return x * 3 + 1; }
int (*fp)(int) = helper;
int table[64];
static const char *names[] = { "zero", "one", "two", "three" };
void copy(struct big *a, const struct big *b) { *a = *b; }
int calls(int x) { ext(x); puts("hello"); puts(names[x & 3]); return fp(x) + helper(x); }
int loop(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * (i & 3 ? 1 : 2); return s; }
int back(const int *a) { return a[-3] + table[-1 + (a[0] & 1)]; }
int sw(int x) {
	switch (x) {
	case 0: return ext(1), 5;
	case 1: return table[3];
	case 2: ext(3); return 9;
	case 3: return table[7] + 2;
	case 4: return puts("x");
	case 5: return 3;
	case 6: return names[2][1];
	default: return -1;
	}
}
void ext(int x) { table[x & 63]++; }
int puts(const char *s) { return s[0]; }
void *memcpy(void *d, const void *s, unsigned long n) { char *a = d; const char *b = s; while (n--) *a++ = *b++; return d; }
void _start(void) { table[0] = sw(table[1]) + calls(2) + back(table + 8); }
"""


def objdump_texts(elf: Places, path: Path, cmap) -> list[str]:
    """objdump's output over PATH as disasm._functions runs it (one text per range)."""
    tool = get_target(elf.target).objdump
    ranges = [(None, None)] if elf.relocatable else cmap.code_ranges(disasm.SKIP_PADDING)
    return [subprocess.run(disasm.objdump_argv(tool, path, elf.relocatable, start, stop), capture_output=True,
                           text=True, errors="replace", check=True).stdout for start, stop in ranges]


def both_ways(path: Path, stubs: bool = True, sizes=(1 << 20, 4093)) -> tuple[list, int]:
    """PATH's functions normalised in Python (`_blocks`, `Normaliser.body`) and, read SIZES at a
    time, through `_normalised` (C where it applies), each checked to be the Python's; (the
    Python's, how many bodies C normalised itself). STUBS False: the code map is left out (no
    linker stubs to name, so C applies where it would not)."""
    with Places(path) as elf:
        cmap = unsized.of_image(elf.image, elf.target)
        texts = objdump_texts(elf, path, cmap)
        cmap = cmap if stubs else None
        reference = Normaliser(elf, cmap)
        python = [(s, n, reference.body(b, n)) for text in texts for s, n, b in disasm._blocks(io.StringIO(text))]
        for size in sizes:
            norm = Normaliser(elf, cmap)
            c = [f for text in texts for f in disasm._normalised(io.StringIO(text), norm, size)]
            assert len(c) == len(python)
            for mine, theirs in zip(c, python):
                assert mine == theirs
        context = Normaliser(elf, cmap).fast_context()
        done = 0
        if context is not None:
            for text in texts:
                done += sum(f[3] for f in _normalise.blocks(text, ["", None, ""], True, context)[0])
        return python, done


LINK = {"loongarch64": ["-fuse-ld=lld"], "hppa": ["-fno-tree-loop-distribute-patterns"]}


def link_program(target: str, compiler: str, source: Path, out: Path) -> Path | None:
    """SOURCE linked for TARGET without a libc (anything left undefined ignored), or None."""
    t = TARGETS[target]
    argv = t.compiler_argv(compiler) + list(t.base_cflags) + ["-O2", "-nostdlib", "-static", *LINK.get(target, []),
                                                             "-Wl,--unresolved-symbols=ignore-all", str(source),
                                                             "-o", str(out)]
    if compiler != "clang":
        argv.append("-lgcc")
    r = subprocess.run(argv, capture_output=True)
    return out if r.returncode == 0 else None


@pytest.mark.parametrize("target,compiler", FLAVOURS, ids=[t for t, _ in FLAVOURS])
def test_real_objects_and_executables_of_every_target(tmp_path, target, compiler):
    src = tmp_path / "code.c"
    src.write_text(SOURCE)
    obj = compile_object(target, compiler, src, tmp_path / "code.o")
    exe = link_program(target, compiler, src, tmp_path / "code")
    if obj is None or exe is None:
        pytest.skip(f"no {compiler} or linker for {target} here")
    fast = target != "loongarch64"   # llvm-objdump's output is the Python's alone
    for path in (obj, exe):
        python, done = both_ways(path)
        assert {name for _, name, _ in python} >= {"calls", "loop", "sw", "back"}
        if path == exe and fast:   # every body of an executable is C's
            assert done == len(python), path
    with Places(obj) as elf:
        # relocations in every body but one or two; riscv objects keep to the Python
        assert (Normaliser(elf).fast_context() is None) == (target in ("riscv64", "loongarch64"))


def static_program(directory: Path) -> Path:
    """SOURCE in a static, non-PIE x86-64 program with glibc: jump tables, rip-relative data."""
    src = directory / "prog.c"
    src.write_text('#include <stdio.h>\n#include <string.h>\n' + SOURCE.split("void ext(int x)")[0].replace(
        "extern int puts(const char *);\n", "") + "int main(int c, char **v) { ext(c); return sw(c) + (int)strlen(v[0]); }\n"
        "void ext(int x) { printf(\"%d\\n\", x); }\n")
    exe = directory / "prog"
    subprocess.run(["gcc", "-O2", "-fno-pie", "-static", "-no-pie", "-o", str(exe), str(src)], check=True, capture_output=True)
    return exe


def test_linked_x86_program_with_jump_tables_and_rip_relative_data(tmp_path):
    exe = static_program(tmp_path)
    # glibc's IFUNC PLT entries are linker stubs, which keep a file to the Python: leave them out
    python, done = both_ways(exe, stubs=False)
    assert done == len(python) > 500
    text = "\n".join(body for _, _, body in python)
    assert "*<jump table>(," in text and ">(%rip)" in text and "cmp    $<" in text
    sw = next(body for _, name, body in python if name == "sw")
    assert "<jump table>" in sw and "<.+0x" in sw
    # and as it is (IFUNC stubs): the Python's alone, through the same generator
    both_ways(exe)


LINKED = r"""
	.section .rodata
.Ltable:	.quad	1f, 2f
	.text
	.globl	user
	.type	user, @function
user:
	cmp	$boundary, %rdi
	jb	2f
	movq	$fn, slot(%rip)
	lea	-0x10+slot(%rip), %rax
	jmp	*.Ltable(,%rdi,8)
1:	mov	$1, %eax
	ret
2:	xor	%eax, %eax
	ret
	int3
	.size	user, .-user
boundary:
	.p2align 6, 0xcc
	.globl	fn
	.type	fn, @function
fn:	ret
	.p2align 4
	.size	fn, .-fn
	.bss
slot:	.quad	0
"""


def test_hand_written_executable(tmp_path):
    src, obj, exe = tmp_path / "l.s", tmp_path / "l.o", tmp_path / "l"
    src.write_text(LINKED)
    subprocess.run(["gcc", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    subprocess.run(["ld", "-e", "user", "-o", str(exe), str(obj)], check=True, capture_output=True)
    python, done = both_ways(exe, sizes=(1 << 20, 1, 7, 64))
    assert done == len(python)
    user = dict((n, b) for _, n, b in python)["user"].split("\n")
    assert "jmp    *<jump table>(,%rdi,8)" in user and "cmp    $<boundary>,%rdi" in user


@pytest.mark.slow
def test_vmlinux_pair():
    """The suite's vmlinux (tests/kernel_util.py; FLAGBENCH_KERNEL_PAIR for bench/make-kernel-pair
    --big's pair, over 20,000 functions): every function normalised alike, all of them in C."""
    from kernel_util import vmlinux_files
    for path in vmlinux_files():
        python, done = both_ways(path, sizes=(1 << 20,))
        assert len(python) > 2000 and done == len(python), path


# -- made up: bodies and streams at the edges of each pattern ---------------------------------------
LO, HI = 0xffffffff81000000, 0xffffffff81400000      # the fake file's addresses
LO32, HI32 = 0x8000, 0x10000
ENTRY = 0xffffffff81000040   # a jump table's entry: into function "f"


class FakeElf:
    """What a Normaliser asks of a linked x86-64 file, made up from the address asked about:
    None, "" (nothing to say), a description that is not ASCII, or a name."""
    target, relocatable, symbols = "x86_64", False, []

    def __init__(self, is64: bool = True):
        self.is64 = is64
        self.address_range = (LO, HI) if is64 else (LO32, HI32)
        self.asked = []

    def describe_address(self, addr: int, label: bool = False) -> str | None:
        self.asked.append((addr, label))
        if addr == ENTRY:
            return "f+0x10"
        r = addr % 101
        return None if r % 10 == 0 else "" if r % 10 == 1 else "s\u00e9" if r == 2 else f"{'L' if label else 's'}{addr:x}"

    def read_word(self, addr: int, size: int) -> int | None:
        return (ENTRY, 0, addr, None)[addr % 4]


def values(is64: bool):
    lo, hi, mask = (LO, HI, (1 << 64) - 1) if is64 else (LO32, HI32, (1 << 32) - 1)
    edges = [lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, ENTRY, 0, 0x100000, (1 << 64) - 1, 1 << 63]
    edges += [-v & mask for v in edges]   # written after a minus
    return st.sampled_from(edges) | st.integers(lo, hi - 1) | st.integers(0, (1 << 64) - 1)


def hex_text(is64: bool):
    """0x and a value, at 1 to 18 digits (6 to 16 are an address's), now and then in capitals."""
    return st.builds(lambda v, width, up: (f"{v:0{width}x}" if not up else f"{v:0{width}X}"),
                     values(is64), st.integers(1, 18), st.integers(0, 9).map(lambda i: i == 0))


NAMES = ["f", "f.cold", "ff", "f+", ".+f", "a<b", "<", "x>y", "sw", ".L3", "$x", "$$dyncall", "é", "s"]
REGS = ["%rax", "%rdx", "%r10", "", "%", "%r_1"]
SPACES = st.sampled_from(["", " ", "        ", "\t", "\x0b", " \x1c", "\n"])


def lines(is64: bool):
    h = hex_text(is64)
    name = st.sampled_from(NAMES)
    minus = st.sampled_from(["", "-", "+", "_", ".", "x", "$", "*", "(", " "])
    rip = st.builds(lambda m, v, g1, sp, hash_, n, close: f"\tlea    {m}0x{v}(%rip){g1}{sp}{hash_}{n}{close}",
                    minus, h, st.sampled_from([",%rax", "", ",%rax #", " x", "\n"]), SPACES,
                    st.sampled_from(["# <", "#<", "# ", "", "# <<"]), name, st.sampled_from([">", "", ">+0x8>", "\n>"]))
    imm = st.builds(lambda op, m, v, tail: f"\t{op}    {m}0x{v}{tail}",
                    st.sampled_from(["mov", "cmp", "cmpq", "jmp", "movq", "call", "and", "\tcmp", " cmp"]), minus, h,
                    st.sampled_from(["", ",%rdi", "(,%rdx,8)", "(,%r10,8)", "(,%,8)", "(,%rdx,4)", "(%rax)",
                                     "f", "0x123456"]))
    target = st.builds(lambda op, n, off: f"\t{op}   <{n}{off}>", st.sampled_from(["call", "jmp", "jne"]), name,
                       st.sampled_from(["", "+0x10", "-0x8", "+", ">"]))
    fixed = st.sampled_from(["\tret", "\tint3", "int3", "\tnop", "\txchg   %ax,%ax", "\tcs nopw 0x0(%rax,%rax,1)",
                             "\t...", "", "\t", "\tR_X86_64_PC32\tfoo-0x4", "\tmov    %eax,%ebx\t# x", "-\0",
                             "\0", "\t\tnop", "\tdata16 cs nopw 0x0(%rax,%rax,1)", "\tudf #0", "ret\tint3",
                             "\tjmp    <f+0x10>\n\tint3\n\tint3 "])
    noise = st.text(st.sampled_from(list(" \t\n0x-<>#(%rip),8_.+abcf3\0\x1cé")), max_size=16)
    return st.one_of(rip, imm, target, fixed, noise)


def body_text(is64: bool = True):
    return st.builds(lambda head, ls, tail: head + "\n".join(ls) + tail, st.sampled_from(["", "\n", "\t", "-"]),
                     st.lists(lines(is64), max_size=12), st.sampled_from(["", "\n", "\n\n", "\tint3", " int3", "\n\t"]))


def check_body(body: str, fname: str, is64: bool) -> None:
    ref = Normaliser(FakeElf(is64)).body(body, fname)
    norm = Normaliser(FakeElf(is64))
    c = _normalise.body(body, fname, norm.fast_context())
    if c is None:   # left to the Python: a relocation, text or a description that is not ASCII
        assert "\tR_" in body or not body.isascii() or any(not (d or "").isascii() for d in norm._described.values())
    else:
        assert c == ref
    assert norm.body(body, fname) == ref   # through the cache C filled


@settings(max_examples=1500, deadline=None, database=None)
@given(body=body_text(), fname=st.sampled_from(NAMES))
def test_made_up_bodies(body, fname):
    check_body(body, fname, True)


@settings(max_examples=400, deadline=None, database=None)
@given(body=body_text(False), fname=st.sampled_from(NAMES))
def test_made_up_bodies_of_a_32_bit_file(body, fname):
    check_body(body, fname, False)


@pytest.mark.parametrize("body", ["", "\n", "int3", "\tint3", "ret\n\tint3", "\tint3\n\tint3", "\n\tint3", "\n\n",
                                  "\tret\n\tnop\n", "\tret\n\n\tnop", "\tnop", "\t\t", "-\0\t-\0\0x", "\tR_X",
                                  "\tlea    -0xffffffff81000008(%rip),%rax   # <sw+0x8>",
                                  "\tmov    $0xffffffff81000000,%rax\n\tcmp    $0xffffffff813fffff,%rax",
                                  "\tmov    -0x7f000000,%rax", "\tjmp    *0xffffffff81000040(,%rdx,8)",
                                  "\tjmp    *-0x7effffc0(,%rdx,8)"])
@pytest.mark.parametrize("fname", ["f", "", "<", "é"])
def test_edges(body, fname):
    check_body(body, fname, True)
    check_body(body, fname, False)


def test_the_padding_c_matches_is_model_padding():
    """_normalise.c spells model.PADDING out by hand: a change to the pattern is a change to it."""
    from flagbench.asm.model import PADDING
    assert _normalise.PADDING == PADDING.pattern


PADDING_PIECES = ["data16 ", "cs ", "ds ", "rex ", "rex.W ", "rexW ", "rex.", "rex", "cs", "nop", "nopw", "nop_1", "nop ",
                  "xchg", " ", "  ", "%ax,%ax", "int3", "...", "..", "c.nop", "break 0,0", "mov r8, r8", "lea",
                  "0x0(%", "esi", "rsi", "xsi", ",%", "eiz", "riz", ",1),%", ".inst 0x00000000", ".inst 0x0000000",
                  "udf #0", ".short 0x0000", ".word 0x00000000", "(bad)", "x", "0x0(%rax,%rax,1)", "\t", "\x0b"]


@settings(max_examples=2000, deadline=None, database=None)
@given(line=st.lists(st.sampled_from(PADDING_PIECES), max_size=8).map("".join) | st.text(
    st.sampled_from(list("nopdatcsrex16.W xhg%,i3bk0mv8lzuf#()_")), max_size=14))
def test_padding_lines(line):
    from flagbench.asm.model import PADDING
    assert _normalise.is_padding(line) == bool(PADDING.match(line))


@pytest.fixture(scope="module")
def real_bodies(tmp_path_factory):
    """The raw bodies of the static program's functions, and its file open for Normalisers."""
    exe = static_program(tmp_path_factory.mktemp("static"))
    with Places(exe) as elf:
        text = "".join(objdump_texts(elf, exe, unsized.of_image(elf.image, elf.target)))
        yield elf, [(name, body) for _, name, body in disasm._blocks(io.StringIO(text)) if body]


EDIT_TEXT = st.sampled_from(["-", "0x", "ffffffff", "(%rip)", "# <", ">", "<", "\n", "\t", " ", "(,%rax,8)", "cmp",
                             "int3", "\0", "main", "+0x", "4", "\tR_X86_64_64\tx"])


@settings(max_examples=500, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_real_bodies_mutated(real_bodies, data):
    """A real body with a few edits (a piece deleted, one put in) at random places: C's or Python's."""
    elf, bodies = real_bodies
    name, body = data.draw(st.sampled_from(bodies), label="function")
    for _ in range(data.draw(st.integers(0, 4), label="edits")):
        at = data.draw(st.integers(0, len(body)), label="at")
        cut = data.draw(st.integers(0, 8), label="cut")
        body = body[:at] + data.draw(EDIT_TEXT, label="put") + body[at + cut:]
    fname = data.draw(st.sampled_from([name, "main", "sw", "f"]), label="fname")
    ref = Normaliser(elf).body(body, fname)
    norm = Normaliser(elf)
    c = _normalise.body(body, fname, norm.fast_context())
    assert c == ref or (c is None and "\tR_" in body)
    assert norm.body(body, fname) == ref


SECTIONS = ["Disassembly of section .text:", "Disassembly of section .init.text::", "Disassembly of section ",
            "\nDisassembly of section .x:", "/tmp/x:     file format elf64-x86-64", "garbage", ""]


def header(name: str, tail: str) -> str:
    return f"<{name}>{tail}"


def stream_text():
    head = st.builds(header, st.sampled_from(NAMES + ["f<g>", "", ">"]), st.sampled_from([":", ":", ": ", ">:", ""]))
    block = st.one_of(st.builds(lambda h, b: h + "\n" + b, head, body_text()),
                      head, st.sampled_from(SECTIONS), body_text())
    seps = st.sampled_from(["\n\n", "\n\n", "\n\n\n", "\n", "\n\n\n\n"])
    return st.builds(lambda bs, ss, end: "".join(b + s for b, s in zip(bs, ss)) + end,
                     st.lists(block, max_size=10), st.lists(seps, min_size=10, max_size=10),
                     st.sampled_from(["", "\n", "\ud800", "é"]))


@settings(max_examples=600, deadline=None, database=None)
@given(text=stream_text(), size=st.integers(1, 300))
def test_made_up_streams(text, size):
    ref = Normaliser(FakeElf())
    python = [(s, n, ref.body(b, n)) for s, n, b in disasm._blocks(io.StringIO(text))]
    assert list(disasm._normalised(io.StringIO(text), Normaliser(FakeElf()), size)) == python


def test_the_state_carries_a_function_across_calls():
    context = Normaliser(FakeElf()).fast_context()
    state = ["", None, ""]
    out, used = _normalise.blocks("Disassembly of section .text:\n\n<f>:\n\tret\n\n<.L1>:\n\tno", state, False, context)
    assert (out, used, state) == ([], 42, [".text", "f", "\tret"])
    out, used = _normalise.blocks("<.L1>:\n\tpush   %rbx\n\n<g>:\n\tjmp    <f>", state, True, context)
    assert out == [(".text", "f", "ret\npush   %rbx", True), (".text", "g", "jmp    <f>", True)]
    assert state == [".text", None, ""]
    # a relocation: the raw body, for the Python
    out, _ = _normalise.blocks("<h>:\n\tcall   <x>\tR_X86_64_PLT32\tx-0x4", ["s", None, ""], True, context)
    assert out == [("s", "h", "\tcall   <x>\tR_X86_64_PLT32\tx-0x4", False)]


def test_odd_input_is_an_exception_not_a_crash():
    context = Normaliser(FakeElf()).fast_context()
    with pytest.raises(TypeError, match="state"):
        _normalise.blocks("<f>:\n", ["", None], True, context)
    with pytest.raises(TypeError, match="state"):
        _normalise.blocks("<f>:\n", [1, None, ""], True, context)
    with pytest.raises(TypeError, match="context"):
        _normalise.blocks("<f>:\n", ["", None, ""], True, context[:3])
    with pytest.raises(TypeError):
        _normalise.body(b"ret", "f", context)

    def broken(*args):
        raise ZeroDivisionError("from describe_address")
    bad = (context[0], broken, broken) + context[3:]
    with pytest.raises(ZeroDivisionError):
        _normalise.body("\tmov    $0xffffffff81000008,%rax", "f", bad)
    with pytest.raises(ZeroDivisionError):
        _normalise.blocks("<f>:\n\tjmp    *0xffffffff81000040(,%rdx,8)", ["", None, ""], True, bad)
    assert _normalise.body("\tnop\u00e9", "f", context) is None
