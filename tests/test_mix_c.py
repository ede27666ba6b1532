"""asm/_mix.c, the instruction mix of x86-64 code in C, held to asm.mix's and asm.isa.x86's Python
(the reference): each rule apart (shape, padding, parse, classify) and whole mixes, on the code
real compilers make (and on a vmlinux pair where there is one) and on generated AT&T lines."""
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from flagbench.asm import _mix, mix as M
from flagbench.asm.disasm import disassemble
from flagbench.asm.isa import x86
from flagbench.asm.model import EVERY, PADDING
from flagbench.toolchains import TARGETS
from test_asm import CODE, FILLER

# hypothesis keeps caches in .hypothesis/ of the working directory: not in the checkout
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "flagbench-hypothesis"))
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

DATA = Path(__file__).parent / "data"

# What compilers make of ordinary C (string operations, SSE/AVX, atomics, jump tables, calls
# through tables and pointers, TLS, conversions), and a function of hand-written instructions
# for the forms they rarely make (string operations without rep, pushes and pops of memory,
# segment operands, notrack and bnd, x87, padding spellings).
RICH = r"""
struct big { char b[300]; };
void copy(struct big *a, const struct big *b) { *a = *b; }
void clear(struct big *a) { __builtin_memset(a, 0, sizeof *a); }
int same(const void *a, const void *b, unsigned long n) { return __builtin_memcmp(a, b, n); }
unsigned long length(const char *s) { return __builtin_strlen(s); }
#ifdef __SSE2__	/* not in kernel code */
double dot(const double *a, const double *b, int n) { double s = 0; for (int i = 0; i < n; i++) s += a[i] * b[i]; return s; }
float fsum(const float *a, int n) { float s = 0; for (int i = 0; i < n; i++) s += a[i]; return s; }
double to_double(long x) { return (double)x; }
long to_long(double x) { return (long)x; }
#endif
void vadd(int *restrict a, const int *restrict b, int n) { for (int i = 0; i < n; i++) a[i] += b[i] * 3; }
long bump(long *p) { return __atomic_fetch_add(p, 1, __ATOMIC_SEQ_CST); }
int swap(int *p, int o, int n) { return __atomic_compare_exchange_n(p, &o, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); }
void setbit(unsigned long *p, int i) { __atomic_fetch_or(p, 1UL << i, __ATOMIC_SEQ_CST); }
extern int f0(int), f1(int), f2(int), f3(int);
int (*table[4])(int) = { f0, f1, f2, f3 };
int through_table(int i, int x) { return table[i & 3](x) + table[(i + 1) & 3](x); }
void through_pointer(void (**pp)(void)) { pp[1](); pp[2](); }
int pick(int x) {
	switch (x) {
	case 0: return f0(x); case 1: return f1(x + 1); case 2: return f2(x * 3); case 3: return f3(x - 7);
	case 4: return x * 9; case 5: return x ^ 0x55; case 6: return x << 3; case 7: return -x;
	default: return 0;
	}
}
int smaller(int a, int b) { return a < b ? a : b; }
int equal(long a, long b) { return a == b; }
long divide(long a, long b) { return a / b + a % b; }
__thread int tls;
int get_tls(void) { return tls; }
long widen(const signed char *c, const unsigned short *s, const int *i) { return *c + *s + (long)*i; }
unsigned long rotate(unsigned long x, int n) { return (x << n) | (x >> (64 - n)); }
long *shared;
void add_five(void) { *shared += 5; }
const char *name(int i) { return i ? "a<b>" : "with, comma"; }

__asm__(".text\n.globl by_hand\n.type by_hand,@function\nby_hand:\n"
	"rep movsb\nrep movsq\nmovsl\nstosb\nlodsq\nscasw\ncmpsb\nrepnz scasb\nrepz cmpsb\ninsb\noutsw\nrep stosq\n"
	"lock incl (%rax)\nlock cmpxchg %rdx,(%rdi)\nlock xadd %eax,(%rsi)\n"
	"pushq 8(%rax)\npopq 8(%rax)\npush %rbx\npop %rbx\npushw %ax\n"
	"call *%rax\ncall *8(%rax)\ncall *(%rax,%rbx,8)\njmp *%rax\njmp *8(%rax)\nnotrack jmp *%rax\n"
	".byte 0xf2,0xff,0xe2\nmovss (%rax),%xmm0\nmovsd %xmm1,8(%rbx)\nmovd %eax,%xmm0\nmovq %xmm0,(%rax)\n"
	"vmovdqu (%rax),%ymm0\nvmovdqu %ymm0,(%rdx)\ncvtsi2sdl (%rax),%xmm0\ncvttsd2si %xmm0,%eax\n"
	"stmxcsr (%rax)\nldmxcsr (%rax)\nsete (%rax)\nsetne %al\ncmovne (%rax),%ecx\nbt %eax,(%rdx)\n"
	"bts %eax,(%rdx)\nbtrl $3,(%rdx)\nmovsbl (%rax),%ecx\nmovzwl 2(%rax),%edx\nmovslq (%rax),%rcx\n"
	"movsbw %al,%cx\naddl $1,(%rax)\nincq 8(%rax)\nnegl (%rax)\nxchg %eax,(%rdx)\n"
	"mov %fs:0x28,%rax\nmov %gs:(%rax),%rcx\nmov %es:(%rdi),%al\nmov %eax,%fs:8(%rdx)\n"
	"lea 8(%rax),%rcx\nnop\nnopw 0x0(%rax,%rax,1)\n.byte 0x66,0x66,0x2e,0x0f,0x1f,0x84,0,0,0,0,0\nxchg %ax,%ax\n"
	"endbr64\nud2\nclflush (%rax)\nprefetcht0 (%rax)\ninvlpg (%rax)\nfldl (%rax)\nfstpl 8(%rax)\n"
	"fxsave (%rax)\nimul 8(%rax),%ecx\nimul $3,(%rax),%ecx\ndivq (%rax)\nmulb (%rax)\ntest %eax,(%rdx)\n"
	"cmpq $0,(%rax)\nucomiss (%rax),%xmm0\ncomisd 8(%rax),%xmm1\nmov %r8d,(%rax)\nmov %r9w,(%rax)\n"
	"mov %r10b,(%rax)\nmov (%rax),%r11d\nmov %cr0,%rax\nmov %rax,%cr3\nmov %ds,%eax\nmov %eax,%ds\n"
	"fld %st(1)\nlea (%rip),%rax\nmov (%rip),%rax\nrepz ret\nret\nleave\nint3\n"
	".size by_hand, .-by_hand\n");
"""
KERNEL = ["-mno-sse", "-mgeneral-regs-only", "-mcmodel=kernel", "-fno-pic", "-mno-red-zone"]
# (compiler, flags): gcc and clang, their usual levels, vector code, kernel code, CET
BUILDS = [("gcc", ["-O2"]), ("gcc", ["-Os"]), ("gcc", ["-O0"]), ("gcc", ["-O3", "-mavx2"]), ("gcc", KERNEL),
          ("gcc", ["-O2", "-fcf-protection", "-fPIC"]), ("clang", ["-O2"]), ("clang", ["-O3", "-mavx2"]),
          ("clang", KERNEL)]


@pytest.fixture(scope="module")
def real_functions(tmp_path_factory) -> list[str]:
    """The texts of the functions of x86-64 objects built here from RICH, test_asm's code and the
    C sources under tests/data, by gcc and clang with the flags of BUILDS."""
    d = tmp_path_factory.mktemp("mix_c")
    sources = {"rich": RICH, "asm": FILLER + CODE}
    sources.update((p.stem, p.read_text()) for p in sorted(DATA.glob("*.c")) + sorted((DATA / "size").glob("*.c")))
    t = TARGETS["x86_64"]
    texts = []
    for name, code in sources.items():
        (d / f"{name}.c").write_text(code)
        for i, (compiler, flags) in enumerate(BUILDS):
            out = d / f"{name}.{i}.o"
            argv = t.compiler_argv(compiler) + list(t.base_cflags) + ["-c", str(d / f"{name}.c"), "-o", str(out)]
            r = subprocess.run(argv + flags, capture_output=True, text=True)
            if r.returncode and name in ("rich", "asm"):
                pytest.fail(f"{' '.join(argv + flags)}: {r.stderr}")
            if r.returncode == 0:
                texts += [f.text for f in disassemble(out).functions.values()]
    return texts


def fields(shape: str):
    """What the Python says of SHAPE, as `_mix.x86_insn` gives it."""
    p = M.parse(shape, "#")
    if p is None:
        return None
    i = x86(*p)
    return (i.mn, i.ops, i.loads, i.stores, i.call, i.branch, i.string_op, frozenset(i.target_regs),
            frozenset(i.defs), frozenset(i.uses), i.symbolic)


def python_shape(line: str) -> str:
    return M._NUMBER.sub("0", M._SYMBOL.sub("<>", line))


def assert_line_alike(line: str) -> None:
    """LINE (ASCII) gets the same shape, padding, parse and Insn from C and Python, and so does its shape."""
    shape = _mix.x86_shape(line)
    assert shape == python_shape(line), line
    assert _mix.is_padding(line) == bool(PADDING.match(line)), line
    for text in (line, shape):
        assert _mix.x86_parse(text) == M.parse(text, "#"), text
        assert _mix.x86_insn(text) == fields(text), text


def lines_of(text: str) -> list[str]:
    return text.split("\n") if text else []


def test_every_line_of_real_x86_code_is_classified_alike(real_functions):
    lines = {line for text in real_functions for line in lines_of(text)}
    assert len(lines) > 2000
    for line in lines:
        assert_line_alike(line)
    found = [f for f in map(_mix.x86_insn, {_mix.x86_shape(line) for line in lines}) if f is not None]
    # the forms the C has to get right are there: string ops with and without rep, calls through
    # memory and registers, pushes of memory, loads and stores of every width
    assert {"rep movsb", "rep movsq", "movsl", "rep cmpsb", "insb", "outsw"} <= {f[6] for f in found}
    assert any(f[4] == "indirect" and f[2] == [8] and f[7] for f in found)      # call *8(%rax)
    assert any(f[4] == "indirect" and not f[2] for f in found)                  # call *%rax
    assert any(f[0].startswith("push") and f[2] == [8] == f[3] for f in found)
    assert {1, 2, 4, 8, 16, 32} <= {w for f in found for w in f[2] + f[3]}


def test_mixes_of_real_x86_functions_are_the_pythons(real_functions):
    for text in real_functions:
        want = M.py_mix("x86_64", lines_of(text))
        assert M.mix("x86_64", text) == want
        assert M.mix("x86_64", lines_of(text)) == want
    each = M.Mix()
    for text in real_functions:
        each += M.py_mix("x86_64", lines_of(text))
    assert M.py_mix_sum("x86_64", [lines_of(t) for t in real_functions]) == each
    assert M.mix_sum("x86_64", real_functions) == each
    assert M.mix_sum("x86_64", [lines_of(t) for t in real_functions]) == each
    assert each.calls_indirect and each.call_seq_insns > each.calls_direct + each.calls_indirect


def test_only_x86_is_mixed_in_c():
    assert [t for t in TARGETS if M._mixer(t) is not None] == ["x86_64"]


@pytest.mark.slow
@pytest.mark.slow
def test_the_vmlinux_pair_is_mixed_alike():
    """The suite's vmlinux (tests/kernel_util.py; FLAGBENCH_KERNEL_PAIR for bench/make-kernel-pair
    --big's pair, 20,000 functions, 1.2 million lines a side): every distinct line and shape
    alike, and the mixes of every function and their sum."""
    from kernel_util import vmlinux_files
    for path in vmlinux_files():
        texts = [f.text for f in disassemble(path, EVERY, mix_each=False).functions.values()]
        assert len(texts) > 2000, (path, len(texts))
        lines = {line for text in texts for line in lines_of(text)}
        shapes = set()
        for line in lines:
            shape = _mix.x86_shape(line)
            assert shape == python_shape(line), line
            assert _mix.is_padding(line) == bool(PADDING.match(line)), line
            shapes.add(shape)
        for shape in shapes:
            assert _mix.x86_insn(shape) == fields(shape), shape
        assert M.mix_sum("x86_64", texts) == M.py_mix_sum("x86_64", [lines_of(t) for t in texts])
        for text in texts:
            assert M.mix("x86_64", text) == M.py_mix("x86_64", lines_of(text))


# ---------------------------------------------------------------- generated lines

REGS = ["%rax", "%eax", "%ax", "%al", "%ah", "%rsi", "%esi", "%si", "%sil", "%spl", "%bpl", "%rsp", "%esp", "%rip",
        "%r8", "%r8d", "%r8w", "%r8b", "%r15", "%r10d", "%xmm0", "%xmm15", "%ymm1", "%zmm2", "%mm3", "%st", "%st(1)",
        "%es", "%cs", "%fs", "%gs", "%ds", "%cr0", "%dr7", "%k1", "%riz", "%eiz", "%eflags", "%r1", "%e", "%r12q"]
SEGMENTS = ["", "", "", "%es:", "%ds:", "%fs:", "%gs:", "%cs:", "%ss:"]
SYMBOLS = ["<sym>", "<sym+0x10>", "<.+0x12>", "<.-0x4>", '<"a<b">', '<"x\\"y">', '<"with, comma">', "<a,b>",
           "<$$dyncall>", "<stub:foo>", "<stub:bar+0x8>", "<a<b>>", "<", ">", "<f.cold+0x1a>", '<"a\\>', '<"">',
           '<"a\\">b">', '<"\\\\">', '<"q\\"">', '<"a\\', '<"1\\"2">,3">', '<"$">', "<$x>"]
NUMBERS = ["0x10", "-0x8", "0", "1", "8", "0xffffffffffffff80", "-1", "0x0", "12345", "0x1f", "abc", "-c0", "1a"]
MNEMONICS = (
    "movsb movsw movsl movsq stosb stosw stosl stosq lodsb lodsq scasb scasw cmpsb cmpsl insb insl outsb outsw "
    "movs stos call callq jmp jmpq je jne jb ja js jrcxz push pushq pushw pop popq popw sete setne setb seta "
    "mov movb movw movl movq movabs movsbl movsbw movswl movslq movzbl movzwl movzbw movsbq movzwq movsx movzx "
    "movss movsd movsd movd movq vmovd vmovq vmovdqu vmovdqa vmovups vmovaps movaps movups movdqa movnti movbe "
    "cvtsi2sd cvtsi2sdl cvttsd2si cvtss2sd vcvtsi2sd vcvttss2si stmxcsr ldmxcsr add addl addq sub subq and andl "
    "or orb xor xorl cmp cmpb cmpw cmpl cmpq test testb testl adc sbb inc incl incq dec decl neg negl not notq "
    "shl shll shr sar sal rol ror rcl rcr imul imull mul mulb div divq idiv idivl xchg xchgl xadd xaddl cmpxchg "
    "cmpxchgq cmpxchg8b bt btl bts btsq btr btrl btc btcq lea leal leaq nop nopw nopl prefetcht0 prefetchw "
    "clflush clwb invlpg endbr64 ud2 ud1 ret retq leave leaveq int3 hlt cpuid rdtsc cmove cmovne cmovb ucomiss "
    "ucomisd comiss comisd fld fldl fstp fstpl fxsave xsave vpaddd paddd pxor vpxor bswap popcnt lzcnt tzcnt "
    "xlat cwtl cltq cqto sfence lfence mfence pause ss sq ssd sd s b w l q").split()
PREFIXES = ["rep", "repz", "repe", "repnz", "repne", "lock", "notrack", "bnd", "data16", "cs", "ds", "es", "ss",
            "fs", "gs", "addr32", "rex", "rex.W", "rex.WB", "xacquire", "xrelease"]
SPACES = [" ", "  ", "   ", "\t", " \t", "\x0b", "\x0c", "\r", "\x1c", "\x1f", ""]
PADDINGS = ["nop", "nopw   0x0(%rax,%rax,1)", "nopl   0x0(%rax)", "cs nopw 0x0(%rax,%rax,1)",
            "data16 cs nopw 0x0(%rax,%rax,1)", "data16 data16 cs nopw 0x0(%rax,%rax,1)", "xchg   %ax,%ax",
            "xchg %ax,%ax", "xchg %ax,%axx", "int3", "int3 ", "int3x", "...", "....", "(bad)", ".inst 0x00000000 x",
            "lea    0x0(%esi,%eiz,1),%esi", "lea 0x0(%rsi,%riz,1),%rsi", "lea    0x0(%esi,%eiz,1),%esii",
            "rex.W nop", "rex nop", "rexfoo nop", "rex.a.b nop", "ds nop", "dsnop", "c.nop", "break 0,0",
            "mov r8, r8", "udf #0", ".short 0x0000", ".word 0x00000000", ".word 0x1", "nopx", "nop_1 a", "cs  nop"]
DATA_LINES = ["foo:", "<foo>:", ".word 0x1", ".short 0x2", ".byte 0x3", ".long 0x4", ".quad 0x5", "", " ", "\t", ":"]
# beyond ASCII: Python's \w and str.strip know these (the C hands such lines to Python)
UNICODE = ["é", "\u00a0", "\u2003", "\u0660", "\uff10", "ß", "\u3000", "\x85"]


def _join(parts) -> str:
    return "".join(parts)


number = st.sampled_from(NUMBERS)
symbol = st.sampled_from(SYMBOLS)
register = st.sampled_from(REGS)
index = st.tuples(st.sampled_from(["", ","]), register, st.sampled_from(["", ",1", ",2", ",4", ",8"])).map(_join)
memory = st.tuples(st.sampled_from(SEGMENTS), st.one_of(st.just(""), number, symbol),
                   st.one_of(st.tuples(st.just("("), st.one_of(st.just(""), register), index, st.just(")")).map(_join),
                             st.just("(%rax)"), st.just("((%rax))"), st.just("(,%rax,8)"), st.just("")),
                   ).map(_join)
operand = st.one_of(
    register, memory, symbol, number,
    st.tuples(st.just("$"), st.one_of(number, symbol)).map(_join),                   # immediates
    st.tuples(st.just("*"), st.one_of(register, memory, symbol)).map(_join),         # call/jmp through
    st.sampled_from(["%es:(%rdi)", "%ds:(%rsi)", "(%dx)", "{%k1}", "{z}", "[x,y]", "{a,b}", "\"q,\"", "\"",
                     "((a,b),c)", ")", "(", "a>b", "%", "%%rax", "*", ":", "%fs:", "x y", "-", "."]),
    st.text(alphabet="%$*()<>,:.\" -0123456789abcdefxrsp", max_size=10),
)
instruction = st.tuples(
    st.lists(st.sampled_from(PREFIXES), max_size=2).map(lambda ps: "".join(p + " " for p in ps)),
    st.one_of(st.sampled_from(MNEMONICS), st.text(alphabet="abcdeilmnopqrstuvwxz.", min_size=1, max_size=7)),
    st.sampled_from(SPACES),
    st.lists(operand, max_size=4).map(",".join),
    st.sampled_from(["", "", "", "  # <sym>", " # 0x10", " #", "# x", " <note>", " <a,b>", " <stub:x>",
                     " # <a", " <x> <y>", " ", "\t"]),
).map(_join)


@st.composite
def mutated(draw, spellings) -> str:
    """One of SPELLINGS with a character or two replaced, taken out or put in: the edges of
    what the C reads character by character (padding spellings, symbols)."""
    text = draw(st.sampled_from(spellings))
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.integers(0, len(text)))
        char = draw(st.sampled_from(list(" %$,.()<>\"\\:0123456789abcdefilnorswxz_") + ["\t", "\x1f", ""]))
        cut = draw(st.integers(0, 1))
        text = text[:at] + char + text[at + cut:]
    return text


line = st.one_of(
    instruction,
    mutated(PADDINGS),
    st.tuples(st.sampled_from(["mov    $", "call   ", "jmp    *", "lea    ", "cmpl   $0x1,"]),
              mutated(SYMBOLS + NUMBERS), st.sampled_from(["", ",%rsi", "(%rip),%rax"])).map(_join),
    st.tuples(st.sampled_from(SPACES), instruction, st.sampled_from(SPACES)).map(_join),
    st.sampled_from(PADDINGS + DATA_LINES),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=127, blacklist_characters="\n"), max_size=30),
)


def test_spellings_edited_one_character_are_read_alike():
    """Every padding spelling and symbol with each of its characters taken out, doubled or
    replaced: the C reads them character by character, the Python with regular expressions."""
    chars = " %$,.()<>\"\\:0135afiswx_\t"
    lines = PADDINGS + [f"mov    ${s},%rsi" for s in SYMBOLS] + [f"lea    {n}(%rip),%rax" for n in NUMBERS]
    for text in lines:
        for at in range(len(text) + 1):
            assert_line_alike(text[:at] + text[at + 1:])
            assert_line_alike(text[:at] + text[at:at + 1] * 2 + text[at + 1:])
            for c in chars:
                assert_line_alike(text[:at] + c + text[at + 1:])


@settings(max_examples=3000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(line)
def test_generated_lines_are_classified_alike(text):
    assert_line_alike(text)


@st.composite
def function(draw) -> list[str]:
    """A function's lines: generated instructions, with some not ASCII (the C asks the Python)."""
    lines = draw(st.lists(line, max_size=20))
    for _ in range(draw(st.integers(0, 2))):
        if lines:
            i = draw(st.integers(0, len(lines) - 1))
            lines[i] += draw(st.sampled_from(UNICODE)) + draw(st.sampled_from(["", "1", "(", " "]))
    return lines


@settings(max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.lists(function(), min_size=1, max_size=4))
def test_generated_functions_are_mixed_alike(functions):
    each = M.Mix()
    for lines in functions:
        m = M.py_mix("x86_64", lines)
        assert M.mix("x86_64", lines) == m
        assert M.mix("x86_64", "\n".join(lines) if lines else "") == M.py_mix("x86_64", lines_of("\n".join(lines)))
        each += m
    assert M.mix_sum("x86_64", functions) == each
    assert M.py_mix_sum("x86_64", functions) == each


def test_calls_slice_back_through_their_setup():
    """The register slice of a call: through padding, not past a label, a branch or another call,
    twelve instructions back at most."""
    lines = ["mov 0x8(%rdi),%rax", "nopw 0x0(%rax,%rax,1)", "mov 0x10(%rax),%rax", "add $0x1,%rcx", "call *%rax",
             "lea <f>(%rip),%rdx", "foo:", "call *%rdx", "mov %rsi,%rbx", "jmp <.+0x8>", "call *%rbx",
             "mov (%rbx),%r11", *["add $0x1,%rcx"] * 11, "call *%r11", "call *0x8(%rax,%rbx,8)", "call <stub:g>"]
    m = M.mix("x86_64", lines)
    assert m == M.py_mix("x86_64", lines)
    assert (m.calls_direct, m.calls_indirect, m.calls_stub) == (1, 5, 1)
    assert m.call_seq_insns == 3 + 1 + 1 + 1 + 1 + 1 + 1


def test_what_the_c_does_not_take_python_mixes():
    lines = ["mov %eax,\udcff", "mov 0x8(%rax),%rbx"]          # a lone surrogate: no UTF-8
    assert _mix.Mixer().mix(lines, M._x86_line) is None
    assert M.mix("x86_64", lines) == M.py_mix("x86_64", lines)
    assert _mix.Mixer().mix(["mov %eax,%ebx\nret"], M._x86_line) is None   # a line is no two
    assert _mix.Mixer().sum(["ret", ["mov %eax,\udcff"]], M._x86_line) is None
    assert M.mix_sum("x86_64", ["ret", lines]) == M.py_mix_sum("x86_64", [["ret"], lines])
    # read once, whoever mixes them
    assert M.mix("x86_64", iter(lines)) == M.py_mix("x86_64", lines)
    assert M.mix_sum("x86_64", (iter(f) for f in (["ret"], lines))) == M.py_mix_sum("x86_64", [["ret"], lines])


def test_a_mixer_busy_hands_back_to_python():
    mixer, seen = _mix.Mixer(), []

    def classify(line):
        seen.append(mixer.mix(["ret"], classify))
        return M._x86_line(line)

    assert mixer.mix(["mov %eax,(%rdx) é"], classify) == (1, 0, {}, {4: 1}, 0, 0, 0, 0, 0, {})
    assert seen == [None]


def test_a_thousand_string_operations_and_more_are_counted():
    """A line's table value holds the numbers of the first 1,022 string operations; the rest
    are read from the record."""
    names = {f"é{i}": f"op{i}" for i in range(1100)}
    lines = list(names) * 2

    def classify(line):
        return [], [], None, False, names[line], (), (), ()

    mixer = _mix.Mixer()
    for _ in range(2):   # classified, then from the table
        values = mixer.mix(lines, classify)
        assert values[0] == len(lines) and values[-1] == {op: 2 for op in names.values()}


def test_a_bad_answer_from_python_is_an_error():
    with pytest.raises(TypeError):
        _mix.Mixer().mix(["é"], lambda line: (1, 2))
    with pytest.raises(ValueError):
        _mix.Mixer().mix(["é"], lambda line: ([4, 8], [], None, False, None, (), (), ()))
    with pytest.raises(ValueError):
        _mix.Mixer().mix(["é"], lambda line: ([], [], "sideways", False, None, (), (), ()))
    with pytest.raises(ZeroDivisionError):
        _mix.Mixer().mix(["é"], lambda line: 1 / 0)
    with pytest.raises(TypeError):
        _mix.Mixer().mix([b"ret"], M._x86_line)
    with pytest.raises(ValueError):
        _mix.x86_shape("é")
