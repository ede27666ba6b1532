"""flagbench asm on real objects built by real compilers for all seven targets."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flagbench.asm.compare import compare_files as compare
from flagbench.asm.disasm import disassemble
from flagbench.asm.mix import Mix, mix, mix_sum
from flagbench.asm.render import Mixes
from flagbench.toolchains import TARGETS

ALL_TARGETS = ("x86_64", "aarch64", "arm", "riscv64", "loongarch64", "hppa", "hppa64")

# No headers: loongarch64 and hppa64 have no libc headers here. Calls, string literals, a
# static function taken by address and a branchy loop give relocations (named and
# section-relative) and in-function branch targets to normalise.
CODE = r"""
typedef unsigned short u16;
struct big { char b[200]; };
extern void ext(int);
extern int puts(const char *);
static int helper(int x) { return x * 3 + 1; }
int (*fp)(int) = helper;
void assign(void *p, const void *q) { __builtin_memcpy(p, q, 8); }
void copy(struct big *a, const struct big *b) { *a = *b; }
int calls(int x) { ext(x); puts("hello"); puts("world"); return fp(x) + helper(x); }
int loop(const int *a, int n) { int s = 0; for (int i = 0; i < n; i++) s += a[i] * (i & 3 ? 1 : 2); return s; }
u16 ld16(const u16 *p) { return p[3]; }
"""
# Placed first, it moves every function, every string and the data after it.
FILLER = r"""
extern void ext(int);
extern int puts(const char *);
int filler(int x) { puts("a filler string that shifts the others"); ext(x + 7); ext(x * 5); return x ^ 0x55; }
"""


def build(tmp_path, target, name, flags=(), source=CODE):
    t = TARGETS[target]
    src = tmp_path / f"{name}.c"
    src.write_text(source)
    out = tmp_path / f"{name}.{target}.o"
    argv = t.compiler_argv(t.default_compiler) + list(t.base_cflags) + ["-O2", "-c", str(src), "-o", str(out)]
    subprocess.run(argv + list(flags), check=True, capture_output=True)
    return out


def flagbench(*args):
    return subprocess.run([sys.executable, "-m", "flagbench", *args], capture_output=True, text=True)


def function_offsets(path, target):
    """Symbol values from the binutils/llvm nm, independent of flagbench's ELF reader."""
    nm = "llvm-nm-19" if target == "loongarch64" else TARGETS[target].objdump.replace("objdump", "nm")
    out = subprocess.run([nm, str(path)], capture_output=True, text=True, check=True).stdout
    return {parts[2]: int(parts[0], 16) for parts in (line.split() for line in out.splitlines()) if len(parts) == 3}


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_moved_functions_are_same(tmp_path, target):
    old = build(tmp_path, target, "old")
    new = build(tmp_path, target, "new", source=FILLER + CODE)
    # the layout really moved: calls() sits elsewhere and its strings too
    assert function_offsets(old, target)["calls"] != function_offsets(new, target)["calls"]
    c = compare(old, new)
    status = {d.name: d.status for d in c.functions}
    assert status["filler"] == "added"
    for name in ("helper", "assign", "copy", "calls", "loop", "ld16"):
        assert status[name] == "same", (name, c.get(name).old.text, c.get(name).new.text)


def test_falign_functions_64_changes_nothing_on_x86(tmp_path):
    old = build(tmp_path, "x86_64", "old")
    new = build(tmp_path, "x86_64", "new", ["-falign-functions=64"])
    assert function_offsets(old, "x86_64")["loop"] != function_offsets(new, "x86_64")["loop"]
    c = compare(old, new)
    assert c.counts() == {"changed": 0, "added": 0, "removed": 0, "same": 6}


def test_section_relative_relocations_resolve_to_what_they_point_at(tmp_path):
    """x86 objects refer to strings and static functions as .rodata.str1.1+N and .text+N."""
    obj = build(tmp_path, "x86_64", "k", ["-mcmodel=kernel", "-fno-pic"], source=FILLER + CODE)
    raw = subprocess.run(["objdump", "-dr", str(obj)], capture_output=True, text=True).stdout
    assert "R_X86_64_32S\t.rodata.str1" in raw
    calls = disassemble(obj).functions["calls"].text
    assert '$"hello"' in calls and '$"world"' in calls
    assert ".rodata" not in calls and "0x" not in calls.split("call")[1]


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_halfword_load_is_two_bytes_everywhere(tmp_path, target):
    d = disassemble(build(tmp_path, target, "m"))
    m = mix(d.target, d.functions["ld16"].lines)
    assert dict(m.loads) == {2: 1}
    assert not m.stores


def test_loongarch_strict_align_turns_one_8_byte_access_into_eight_1_byte_ones(tmp_path):
    old = build(tmp_path, "loongarch64", "old")
    new = build(tmp_path, "loongarch64", "new", ["-mstrict-align"])
    out = flagbench("asm", str(old), str(new), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assign = next(f for f in doc["functions"] if f["name"] == "assign")
    assert assign["status"] == "changed"
    assert assign["mix"]["old"]["loads"] == {"8": 1} and assign["mix"]["old"]["stores"] == {"8": 1}
    assert assign["mix"]["new"]["loads"] == {"1": 8} and assign["mix"]["new"]["stores"] == {"1": 8}
    assert doc["counts"]["same"] == 5


@pytest.mark.parametrize("target", ALL_TARGETS)
def test_mix_totals_made_from_sums_are_the_sum_of_each_function(tmp_path, target):
    """`mix_sum` (text and md: one count over all lines) and `Mixes.total` (each side's half,
    the other side's standing in for the rest) against `mix`, function by function."""
    old = build(tmp_path, target, "old")
    # functions added, changed (other flags) and the same, on both halves
    new = build(tmp_path, target, "new", ["-O1", "-fno-inline"], source=FILLER + CODE)
    c = compare(old, new, mix_each=False)
    assert c.old.mix_part != c.new.mix_part and c.counts()["changed"] and c.counts()["added"]
    for side, d in (("old", c.old), ("new", c.new)):
        each = Mix()
        for f in d.functions.values():
            each += mix(target, f.lines)
        assert mix_sum(target, [f.lines for f in d.functions.values()]) == each
        assert Mixes(c).total(side) == each, side


def test_aarch64_strict_align_drops_the_8_byte_access(tmp_path):
    old = disassemble(build(tmp_path, "aarch64", "old"))
    new = disassemble(build(tmp_path, "aarch64", "new", ["-mstrict-align"]))
    before = mix("aarch64", old.functions["assign"].lines)
    after = mix("aarch64", new.functions["assign"].lines)
    assert dict(before.loads) == {8: 1} and dict(before.stores) == {8: 1}
    assert 8 not in after.loads and 8 not in after.stores
    # gcc either copies bytewise or hands the unaligned copy to memcpy
    assert after.loads.get(1, 0) == 8 or "<memcpy>" in new.functions["assign"].text


KERNEL = ["-mno-sse", "-mgeneral-regs-only", "-mcmodel=kernel", "-fno-pic"]
UNROLLED = "-mmemcpy-strategy=unrolled_loop:256:noalign,libcall:-1:noalign"


def test_rep_movsq_comes_and_goes_with_the_memcpy_strategy(tmp_path):
    rep = build(tmp_path, "x86_64", "rep", KERNEL)
    unrolled = build(tmp_path, "x86_64", "unrolled", KERNEL + [UNROLLED])
    c = compare(rep, unrolled)
    copy = c.get("copy")
    assert copy.status == "changed"
    old, new = mix("x86_64", copy.old.lines), mix("x86_64", copy.new.lines)
    assert dict(old.string_ops) == {"rep movsq": 1}
    assert not new.string_ops
    assert new.loads[8] >= 4 and new.stores[8] >= 4   # the 4 x 8-byte loop body


ZERO_AND_COPY = "void zero(long *p) { for (int i = 0; i < 100; i++) p[i] = 0; }\n" \
    "void copy(long *d, const long *s) { __builtin_memcpy(d, s, 800); }\n"


def test_a_string_operation_without_a_suffix_is_one(tmp_path):
    """objdump writes `rep stos %rax,%es:(%rdi)` (its width in the register) and `rep movsq
    %ds:(%rsi),%es:(%rdi)`: each one string operation, not an 8-byte load and store."""
    obj = tmp_path / "zc.o"
    subprocess.run(["gcc", "-O2", "-mstringop-strategy=rep_8byte", "-c", "-x", "c", "-o", obj, "-"],
                   input=ZERO_AND_COPY, text=True, check=True)
    d = disassemble(obj)
    zero, copy = d.functions["zero"], d.functions["copy"]
    assert "rep stos %rax,%es:(%rdi)" in zero.text and "rep movsq" in copy.text
    z, c = mix("x86_64", zero.text), mix("x86_64", copy.text)
    assert dict(z.string_ops) == {"rep stos": 1} and not z.loads   # zeroing loads nothing
    assert dict(c.string_ops) == {"rep movsq": 1}
    assert dict(mix_sum("x86_64", [zero.text, copy.text]).string_ops) == {"rep stos": 1, "rep movsq": 1}


@pytest.mark.parametrize("target", ["hppa", "hppa64"])
def test_long_calls_lengthen_the_call_sequence(tmp_path, target):
    short = disassemble(build(tmp_path, target, "short"))
    long = disassemble(build(tmp_path, target, "long", ["-mlong-calls"]))
    before = mix(target, short.functions["copy"].lines)
    after = mix(target, long.functions["copy"].lines)
    assert (before.calls_direct, before.calls_indirect, before.call_seq_insns) == (1, 0, 1)   # b,l memcpy
    # hppa: ldil/ldo/ldw of the plabel, ldil $$dyncall, be,l; hppa64: addil/ldd/ldd/ldd/bve,l
    assert (after.calls_direct, after.calls_indirect, after.call_seq_insns) == (0, 1, 5)
    text = long.functions["copy"].text
    assert "&memcpy" in text   # the literal holding memcpy's address is named by what it holds
    if target == "hppa":
        assert "$$dyncall" in text


def test_x86_mix_widths_and_calls(tmp_path):
    d = disassemble(build(tmp_path, "x86_64", "m"))
    calls = mix("x86_64", d.functions["calls"].lines)
    assert (calls.calls_direct, calls.calls_indirect) == (3, 1)   # ext, puts, puts; fp
    assign = mix("x86_64", d.functions["assign"].lines)
    assert dict(assign.loads) == {8: 1} and dict(assign.stores) == {8: 1}
    lp = mix("x86_64", d.functions["loop"].lines)
    assert dict(lp.loads) == {4: 1} and lp.branches == 2


def test_riscv_assign_is_bytewise_and_calls_are_pairs(tmp_path):
    d = disassemble(build(tmp_path, "riscv64", "m"))
    assign = mix("riscv64", d.functions["assign"].lines)
    assert dict(assign.loads) == {1: 8} and dict(assign.stores) == {1: 8}
    calls = mix("riscv64", d.functions["calls"].lines)
    # three auipc+jalr pairs, and auipc/ld/jalr through fp
    assert (calls.calls_direct, calls.calls_indirect, calls.call_seq_insns) == (3, 1, 9)


def test_text_output_is_plain_when_piped_and_shows_the_diff(tmp_path):
    old = build(tmp_path, "loongarch64", "old")
    new = build(tmp_path, "loongarch64", "new", ["-mstrict-align"])
    out = flagbench("asm", str(old), str(new), "assign")
    assert out.returncode == 0, out.stderr
    assert "\x1b[" not in out.stdout
    assert "1 changed" in out.stdout
    assert "ld.bu" in out.stdout and "st.b" in out.stdout and "ld.d" in out.stdout
    md = flagbench("asm", str(old), str(new), "assign", "--format", "md")
    assert "| loads 1B | 0 | 8 | +8 |" in md.stdout


def test_bad_input_is_one_line_exit_2(tmp_path):
    obj = build(tmp_path, "x86_64", "m")
    text = tmp_path / "notes.txt"
    text.write_text("not an object\n")
    cases = [
        ([str(tmp_path / "missing.o"), str(obj)], "no such file"),
        ([str(text), str(obj)], "not an ELF file"),
        ([str(obj), str(obj), "cals"], "close: calls"),
        ([str(obj), str(obj), "--format", "xml"], "invalid choice"),
        ([str(obj), str(obj), "--limit", "-1"], "--limit -1"),
    ]
    for args, message in cases:
        out = flagbench("asm", *args)
        assert out.returncode == 2, args
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert message in out.stderr
        assert "Traceback" not in out.stderr


def test_different_targets_warn_but_compare(tmp_path):
    out = flagbench("asm", str(build(tmp_path, "x86_64", "a")), str(build(tmp_path, "aarch64", "b")),
                    "--format", "json")
    assert out.returncode == 0
    assert "x86_64" in out.stderr and "aarch64" in out.stderr
    assert json.loads(out.stdout)["counts"]["same"] == 0


# -- two variants of an experiment -------------------------------------------------------
CASES = Path(__file__).resolve().parent.parent / "cases"


def flagbench_cached(tmp_path, *args):
    env = {**os.environ, "FLAGBENCH_CACHE": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "-m", "flagbench", *args], capture_output=True, text=True, env=env)


def test_experiment_strict_align_on_loongarch64(tmp_path):
    # the function named after the options: positionals and options may be mixed
    out = flagbench_cached(tmp_path, "asm", str(CASES / "strict-align"), "--target", "loongarch64",
                           "assign", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert (doc["old"]["build"], doc["new"]["build"]) == ("default/loongarch64/clang", "strict/loongarch64/clang")
    assign = next(f for f in doc["functions"] if f["name"] == "assign")
    assert assign["status"] == "changed"
    assert assign["mix"]["old"]["loads"] == {"8": 1} and assign["mix"]["old"]["stores"] == {"8": 1}
    assert assign["mix"]["new"]["loads"] == {"1": 8} and assign["mix"]["new"]["stores"] == {"1": 8}
    # functions of all four objects in one list
    names = {f["name"] for f in doc["functions"]}
    assert {"assign", "jhash", "flow_key", "get_le64"} <= names
    assert "ld.bu" in "\n".join(row[2] for row in doc["diffs"]["assign"])
    assert "also in the experiment: aarch64/clang, aarch64/gcc" in out.stderr


def test_experiment_long_calls_on_hppa(tmp_path):
    out = flagbench_cached(tmp_path, "asm", str(CASES / "long-calls"), "--target", "hppa", "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    changed = [f for f in doc["functions"] if f["status"] == "changed"]
    assert {f["name"] for f in changed} >= {"call_once", "call_loop"}
    for f in changed:   # every changed function makes its calls with longer sequences
        old, new = f["mix"]["old"], f["mix"]["new"]
        assert new["calls"]["sequence_insns"] > old["calls"]["sequence_insns"], f["name"]
    once = next(f for f in changed if f["name"] == "call_once")["mix"]
    assert (once["old"]["calls"]["sequence_insns"], once["new"]["calls"]["sequence_insns"]) == (1, 5)
    # the callees do not call: built the same both ways
    assert doc["counts"]["same"] >= 1 and doc["counts"]["added"] == doc["counts"]["removed"] == 0


def test_experiment_names_that_collide_are_qualified_by_object(tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    helper = "static int helper(int x) {{ return x * {k} + {j}; }}\n"
    others = "int fb(int x) { return helper(x) + 4; }\nint moved(int x) { return x - 5; }\n"
    (exp / "a.c").write_text(helper.format(k=3, j=1) + "int fa(int x) { return helper(x) + 2; }\n")
    (exp / "b.c").write_text(helper.format(k=5, j=2) + others)
    (exp / "c.c").write_text(helper.format(k=5, j=2) + others)
    (exp / "experiment.toml").write_text(
        'sources = ["a.c", "b.c"]\ncflags = ["-O2", "-fno-inline"]\n'
        '[variants]\nbase = {}\nrenamed = { sources = ["a.c", "c.c"] }\n')
    out = flagbench_cached(tmp_path, "asm", str(exp), "--format", "json")
    assert out.returncode == 0, out.stderr
    status = {f["name"]: f["status"] for f in json.loads(out.stdout)["functions"]}
    # helper is in two objects on each side, so it is paired by object file: b.o is only in
    # the old build, c.o only in the new; the unique names are matched wherever they are
    assert status == {"a.o:helper": "same", "b.o:helper": "removed", "c.o:helper": "added",
                      "fa": "same", "fb": "same", "moved": "same"}
    shown = flagbench_cached(tmp_path, "asm", str(exp), "a.o:helper")
    assert shown.returncode == 0 and "a.o:helper (same" in shown.stdout
    missing = flagbench_cached(tmp_path, "asm", str(exp), "helper")
    assert missing.returncode == 2 and "no function 'helper' in base/x86_64/gcc" in missing.stderr


def test_experiment_options_with_elf_files_are_an_error(tmp_path):
    obj = build(tmp_path, "x86_64", "m")
    out = flagbench("asm", str(obj), str(obj), "--target", "hppa")
    assert out.returncode == 2 and "--target go with an experiment" in out.stderr
    out = flagbench("asm", str(obj))
    assert out.returncode == 2 and "give two ELF files" in out.stderr
    out = flagbench("asm", str(tmp_path / "nothing.toml"))
    assert out.returncode == 2 and "no such experiment file" in out.stderr


# -- padding inside a function ------------------------------------------------------------
# f's second half has no symbol (as in kernel assembly): the int3 alignment run before it
# sits inside f, and the branches across it move with f's placement.
INNER_PADDING = r"""
	.text
{before}
	.globl	f
	.type	f, @function
f:
	test	%edi, %edi
	je	1f
	mov	$1, %eax
	ret
	.p2align 5, 0xcc
1:	lea	(%rsi,%rdx,4), %rcx
	cmp	%rcx, %rsi
	jae	2f
3:	add	$4, %rsi
	cmp	%rcx, %rsi
	jb	3b
{extra}
2:	ret
	.size	f, .-f
"""


def assemble(tmp_path, name, before="", extra=""):
    src = tmp_path / f"{name}.s"
    src.write_text(INNER_PADDING.format(before=before, extra=extra))
    out = tmp_path / f"{name}.o"
    subprocess.run(["gcc", "-c", str(src), "-o", str(out)], check=True, capture_output=True)
    return out


def test_padding_inside_a_function_is_layout(tmp_path):
    old = assemble(tmp_path, "old")
    # an 8-byte function first: f starts at 8, its inner padding shrinks from 22 to 14 bytes
    new = assemble(tmp_path, "new", before="\t.globl g\ng:\tmov $7, %eax\n\tnop\n\tnop\n\tret\n")
    assert function_offsets(new, "x86_64")["f"] == 8
    d_old, d_new = disassemble(old).functions["f"], disassemble(new).functions["f"]
    # what the first pass sees: different padding, and offsets that moved after it
    assert d_old.lines.count("int3") == 22 and d_new.lines.count("int3") == 14
    assert "je     <.+0x20>" in d_old.lines and "je     <.+0x18>" in d_new.lines
    c = compare(old, new)
    assert c.get("f").status == "same"
    assert c.get("g").status == "added"
    # the mix counts the alignment int3s apart: same instructions, only the padding differs
    m_old, m_new = mix("x86_64", d_old.lines), mix("x86_64", d_new.lines)
    assert (m_old.padding, m_new.padding) == (22, 14)
    assert m_old.insns == m_new.insns == len(d_old.lines) - 22
    j = json.loads(flagbench("asm", str(old), str(new), "--format", "json").stdout)
    assert j["total"]["new"]["insns"] == j["total"]["old"]["insns"] + 2   # g's mov and ret; its nops are padding


def test_an_int3_that_aligns_nothing_is_a_change(tmp_path):
    old = assemble(tmp_path, "old")
    # before the last `ret`: the int3 ends at 51, not a multiple of 4, so it is code (like
    # straight-line-speculation hardening), not padding, though `jae 2f` moved only by it
    new = assemble(tmp_path, "new", extra="\tint3")
    c = compare(old, new)
    assert c.get("f").status == "changed"


# -- executables: no relocations, so addresses are named from the symbol table -----------
LINKED = r"""
	.section .rodata
{rodata}
.Ltable:	.quad	1f, 2f
	.text
	.globl	user
	.type	user, @function
user:
	cmp	$boundary, %rdi
	jb	2f
	movq	$fn, slot(%rip)
	jmp	*.Ltable(,%rdi,8)
1:	mov	$1, %eax
	ret
2:	xor	%eax, %eax
	ret
	.size	user, .-user
boundary:
{pad}
	.globl	fn
	.type	fn, @function
fn:	ret
	.size	fn, .-fn
	.bss
slot:	.quad	0
"""


def link(tmp_path, name, rodata="", pad=""):
    src = tmp_path / f"{name}.s"
    src.write_text(LINKED.format(rodata=rodata, pad=pad))
    obj, exe = tmp_path / f"{name}.o", tmp_path / name
    subprocess.run(["gcc", "-c", str(src), "-o", str(obj)], check=True, capture_output=True)
    subprocess.run(["ld", "-e", "user", "-o", str(exe), str(obj)], check=True, capture_output=True)
    return exe


def test_labels_functions_and_jump_tables_in_executables(tmp_path):
    old = link(tmp_path, "old")
    # padding between the label and fn, and the jump table further into .rodata
    new = link(tmp_path, "new", rodata='\t.asciz "moves the table"', pad="\t.p2align 6, 0xcc")
    offsets = function_offsets(new, "x86_64")
    assert offsets["boundary"] != offsets["fn"]
    assert function_offsets(old, "x86_64")["boundary"] == function_offsets(old, "x86_64")["fn"]
    c = compare(old, new)
    user = c.get("user")
    assert user.status == "same", (user.old.text, user.new.text)
    # compared against: the boundary label; stored: the function; the table by what it is
    assert "cmp    $<boundary>,%rdi" in user.old.lines
    assert any(line.startswith("movq   $<fn>,") for line in user.old.lines)
    assert "jmp    *<jump table>(,%rdi,8)" in user.old.lines
    # boundary holds only padding in new: a label, not a function that was added
    assert c.counts() == {"changed": 0, "added": 0, "removed": 0, "same": 2}


@pytest.mark.parametrize("body", ["", "\n", "ret", "ret\n", "ret\nnop", "ret\nint3\n\nnop\n", "nop\nint3", "\nret\n\n",
                                  "mov %eax,%ebx\nxchg %ax,%ax\n"])
def test_trailing_padding_cut_from_the_end_is_the_lines_popped(body):
    from flagbench.asm.disasm import PADDING, _without_trailing_padding
    lines = body.split("\n")
    while lines and (not lines[-1] or PADDING.match(lines[-1])):
        lines.pop()
    assert _without_trailing_padding(body) == "\n".join(lines)


@pytest.fixture(scope="module")
def long_object(tmp_path_factory) -> Path:
    """An x86_64 object of one function of four million instructions (14 MB): both of a pair of it
    take the two-process path (`compare.PARALLEL_BYTES`), and objdump runs for seconds."""
    d = tmp_path_factory.mktemp("long")
    src = d / "long.s"
    src.write_text(".text\n.globl f\n.type f,@function\nf:\n.rept 1000000\n"
                   "mov 8(%rdi),%rax\nadd %rax,%rbx\nlea 16(%rsi),%rcx\ninc %rdx\n.endr\nret\n.size f, .-f\n")
    out = d / "long.o"
    subprocess.run(["as", "-o", str(out), str(src)], check=True, capture_output=True)
    return out


def _running_on(path: Path) -> set[int]:
    """Processes whose command line names PATH: flagbench, its child, the objdumps."""
    found = set()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and str(path).encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                found.add(int(name))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_a_signal_to_asm_leaves_neither_its_child_nor_an_objdump(long_object, signum):
    """The new side's disassembly runs in a forked child, each side with its objdump: a signal to
    flagbench (a kill -9 too) ends all four, not only flagbench (a process pool's worker ran on)."""
    p = subprocess.Popen([sys.executable, "-m", "flagbench", "asm", str(long_object), str(long_object)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         # Ctrl-C as in a terminal: a pytest-xdist worker ignores SIGINT, and an ignored
                         # SIGINT is inherited (a background job's): flagbench rightly keeps ignoring it
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        while len(_running_on(long_object)) < 4:   # flagbench, its child, two objdumps
            assert p.poll() is None, p.stderr.read()
            time.sleep(0.02)
        p.send_signal(signum)
        p.wait(timeout=60)
        for _ in range(500):   # the kernel's parent-death signal and the broken pipes take a moment
            if not _running_on(long_object):
                break
            time.sleep(0.02)
        assert not _running_on(long_object)
        assert p.returncode == (130 if signum == signal.SIGINT else -signum)
    finally:
        p.kill()
        p.wait()
