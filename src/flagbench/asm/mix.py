"""Instruction mix of a normalised function: loads and stores by access width in bytes, calls
(direct, indirect) and the instructions their call sequences take, branches, string operations.

Per-architecture tables say which mnemonics load or store and how wide; a small backward
register slice from each call finds the instructions that compute its target, so an hppa
`-mlong-calls` call (`ldil/ldo/ldw` + `$$dyncall`) counts five instructions where `b,l`
counts one, and the hppa64 descriptor call `addil/ldd/ldd/ldd/bve,l` five as well.

Conventions: a pair or multiple access (aarch64 `ldp`, arm `ldm`/`push`) is one access of
the combined width; x86 `push`/`pop` are 8-byte stores/loads, the stack traffic of
`call`/`ret` is not counted; a read-modify-write memory operand (`addl $1,(%rax)`) is one
load and one store; string instructions count as string operations, not loads/stores.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import chain, compress
from operator import attrgetter

from flagbench.asm._mix import Mixer
from flagbench.asm.model import PADDING
from flagbench.asm.isa import CLASSIFIERS, Insn, x86
from flagbench.targets import get_target


@dataclass
class Mix:
    insns: int = 0             # instructions, alignment padding not counted
    padding: int = 0           # padding instructions inside functions (NOPs, int3 before aligned code)
    loads: dict = field(default_factory=dict)      # width in bytes -> count
    stores: dict = field(default_factory=dict)
    calls_direct: int = 0
    calls_indirect: int = 0
    calls_stub: int = 0        # of the direct calls, those that reach their target through a linker stub
    call_seq_insns: int = 0    # instructions that set up and make the calls, the call included
    branches: int = 0
    string_ops: dict = field(default_factory=dict)  # "rep movsq" -> count

    def __iadd__(self, other: "Mix") -> "Mix":
        self.insns += other.insns
        self.padding += other.padding
        _add(self.loads, other.loads)
        _add(self.stores, other.stores)
        self.calls_direct += other.calls_direct
        self.calls_indirect += other.calls_indirect
        self.calls_stub += other.calls_stub
        self.call_seq_insns += other.call_seq_insns
        self.branches += other.branches
        _add(self.string_ops, other.string_ops)
        return self

    def __isub__(self, other: "Mix") -> "Mix":
        """Take away OTHER, a part of this sum (a count that falls to 0 goes, as if never added)."""
        self.insns -= other.insns
        self.padding -= other.padding
        _take(self.loads, other.loads)
        _take(self.stores, other.stores)
        self.calls_direct -= other.calls_direct
        self.calls_indirect -= other.calls_indirect
        self.calls_stub -= other.calls_stub
        self.call_seq_insns -= other.call_seq_insns
        self.branches -= other.branches
        _take(self.string_ops, other.string_ops)
        return self

    def __reduce__(self):
        """Pickled as plain values: a vmlinux's worth comes back from a worker process."""
        return _from_values, (self.insns, self.padding, dict(self.loads), dict(self.stores), self.calls_direct,
                              self.calls_indirect, self.calls_stub, self.call_seq_insns, self.branches,
                              dict(self.string_ops))

    def to_json(self) -> dict:
        return {
            "insns": self.insns,
            "padding": self.padding,
            "loads": {str(k): v for k, v in sorted(self.loads.items())},
            "stores": {str(k): v for k, v in sorted(self.stores.items())},
            "calls": {"direct": self.calls_direct, "indirect": self.calls_indirect,
                      "through_stubs": self.calls_stub, "sequence_insns": self.call_seq_insns},
            "branches": self.branches,
            "string_ops": dict(sorted(self.string_ops.items())),
        }


_NESTS = re.compile(r'[(\[{<"]')


def _from_values(insns, padding, loads, stores, direct, indirect, stub, seq, branches, string_ops) -> Mix:
    return Mix(insns, padding, loads, stores, direct, indirect, stub, seq, branches, string_ops)


def _add(into: dict, other: dict) -> None:
    for key, n in other.items():
        into[key] = into.get(key, 0) + n


def _take(into: dict, other: dict) -> None:
    for key, n in other.items():
        left = into.get(key, 0) - n
        if left:
            into[key] = left
        else:
            into.pop(key, None)



def split_operands(ops: str) -> list[str]:
    """Split on commas outside (), [], {}, <> and quotes."""
    if not _NESTS.search(ops):
        return [o for o in (part.strip() for part in ops.split(",")) if o]
    out, depth, cur, quote = [], 0, [], False
    for ch in ops:
        if ch == '"':
            quote = not quote
        elif not quote and ch in "([{<":
            depth += 1
        elif not quote and ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0 and not quote:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if cur or out:
        out.append("".join(cur).strip())
    return [o for o in out if o]


def parse(line: str, comment: str | None = None) -> tuple[str, list[str], str] | None:
    """(mnemonic, operands, note) of a normalised line; None for labels and data directives.

    The note is the `<symbol>` the normaliser appended for a relocation (RISC targets).
    >>> parse("ldil L%0,rp <$$dyncall>")
    ('ldil', ['L%0', 'rp'], '<$$dyncall>')
    """
    if not line or line.endswith(":") or line.startswith((".word", ".short", ".byte", ".long", ".quad")):
        return None
    mn, _, ops = line.strip().partition(" ")
    ops = ops.strip()
    if comment:
        at = ops.find(" " + comment)
        if at >= 0 and ops.count("<", 0, at) == ops.count(">", 0, at):
            ops = ops[:at]
    note = ""
    if ops.endswith(">") and " <" in ops:
        at = ops.rindex(" <")
        if ops.count("<", 0, at) == ops.count(">", 0, at):
            ops, note = ops[:at], ops[at + 1:]
    return mn, split_operands(ops), note


SLICE_WINDOW = 12   # instructions looked at before a call for its setup


# What a normalised line is, by target: an Insn, PAD (alignment padding) or NOT_CODE (a label or
# data). Classifying is the cost of a vmlinux's mix (over a million lines), and lines repeat:
# first by the line itself, then by its shape: symbols and numbers blanked (the classifiers
# look at neither, apart from $$dyncall, kept), so one Insn serves many lines. A number starts
# with a digit after a non-word character (or is hex before a base register); register names
# and mnemonic suffixes do not.
class _NotInsn:
    """A line that is not an instruction. False, so a call's register slice stops at it."""
    __slots__ = ("keys", "call")

    def __init__(self, keys: tuple):
        self.keys, self.call = keys, None

    def __bool__(self) -> bool:
        return False


PAD = _NotInsn(("padding",))
NOT_CODE = _NotInsn(())
_LINES: dict[str, dict[str, object]] = {}
_SHAPES: dict[str, dict[str, object]] = {}
_SYMBOL = re.compile(r'<"(?:[^"\\\n]|\\.)*">|<[^<>$\n]*>')     # a string literal may hold < and >
_NUMBER = re.compile(r"(?<![\w.])-?(?:[0-9][0-9a-fx]*|[0-9a-f]+(?=\())")   # hppa: "-c0(sp)"
_INTERN: dict = {}
_keys_of = attrgetter("keys")
_call_of = attrgetter("call")


def _is_none(x) -> bool:
    return x is None


def _classify(target: str, missed: list[str], cache: dict) -> None:
    """Put the lines MISSED into CACHE: padding, or the Insn of their shape. The shapes of all of
    them are made by one pass of each pattern over the lines joined (no pattern crosses a newline):
    a regex call per line was most of the time of a vmlinux's mix."""
    shapes = _SHAPES.setdefault(target, {})
    keys = _NUMBER.sub("0", _SYMBOL.sub("<>", "\n".join(missed))).split("\n")
    t = None
    for line, key in zip(missed, keys):
        if PADDING.match(line):
            cache[line] = PAD
            continue
        what = shapes.get(key)
        if what is None:
            t = t or get_target(target)
            p = parse(key, t.asm_comment or None)
            what = shapes[key] = NOT_CODE if p is None else _slim(CLASSIFIERS[t.isa](*p))
        cache[line] = what


def _slim(insn: Insn) -> Insn:
    """The Insn without its text, its sets and lists shared: thousands stay cached; and the
    keys of what it counts in a Mix, so that a function's counts are one Counter made in C."""
    insn.ops = ()
    for name in ("loads", "stores"):
        value = tuple(getattr(insn, name))
        setattr(insn, name, _INTERN.setdefault(value, value))
    for name in ("target_regs", "defs", "uses"):
        value = frozenset(getattr(insn, name))
        setattr(insn, name, _INTERN.setdefault(value, value))
    insn.keys = ("insns", *(("load", w) for w in insn.loads), *(("store", w) for w in insn.stores),
                 *(("branch",) if insn.branch else ()),
                 *((("string", insn.string_op),) if insn.string_op else ()))
    return insn


# x86-64 is mixed in C (`_mix.Mixer`: the rules of this module and of `isa.x86`, ported for ASCII
# lines; tests hold the two together). The Python below stays the reference, and mixes the other
# targets and whatever the C hands back (it returns None for what it does not take).
_MIXERS: dict[str, Mixer | None] = {}


def _mixer(target: str) -> Mixer | None:
    """TARGET's Mixer, None where Python mixes."""
    try:
        return _MIXERS[target]
    except KeyError:
        t = get_target(target)
        c = Mixer() if (t.isa, t.asm_comment, t.paired_calls) == ("x86", "#", False) else None
        return _MIXERS.setdefault(target, c)


def _x86_line(line: str):
    """What the x86 line LINE (one not ASCII) is, for the Mixer: None (not code), "padding", or
    what the mix counts of its Insn: (loads, stores, call, branch, string_op, target_regs, defs, uses)."""
    if PADDING.match(line):
        return "padding"
    p = parse(_NUMBER.sub("0", _SYMBOL.sub("<>", line)), "#")
    if p is None:
        return None
    i = x86(*p)
    return i.loads, i.stores, i.call, i.branch, i.string_op, i.target_regs, i.defs, i.uses


def _lines(lines: list[str] | str) -> list[str]:
    """LINES, or a function's text split into them as `Function.lines` does."""
    if isinstance(lines, str):
        return lines.split("\n") if lines else []
    return lines


def mix(target: str, lines: list[str] | str) -> Mix:
    """The mix of a function: LINES, or its text."""
    if not isinstance(lines, (str, list, tuple)):
        lines = list(lines)     # read once: the C may hand it back to the Python
    c = _mixer(target)
    values = c.mix(lines, _x86_line) if c is not None else None
    return _from_values(*values) if values is not None else py_mix(target, _lines(lines))


def mix_sum(target: str, functions: list[list[str] | str]) -> Mix:
    """The sum of `mix` over FUNCTIONS (each its lines or its text)."""
    if not isinstance(functions, (list, tuple)):
        functions = list(functions)
    functions = [f if isinstance(f, (str, list, tuple)) else list(f) for f in functions]
    c = _mixer(target)
    values = c.sum(functions, _x86_line) if c is not None else None
    return _from_values(*values) if values is not None else py_mix_sum(target, [_lines(f) for f in functions])


def py_mix(target: str, lines: list[str]) -> Mix:
    """`mix` in Python."""
    m = Mix()
    cache = _LINES.setdefault(target, {})
    insns = list(map(cache.get, lines))           # per line in C; Python only for lines not seen
    if None in insns:
        _classify(target, list(dict.fromkeys(compress(lines, map(_is_none, insns)))), cache)
        insns = list(map(cache.__getitem__, lines))
    _set_counts(m, Counter(chain.from_iterable(map(_keys_of, insns))))
    paired = get_target(target).paired_calls
    for i in compress(range(len(insns)), map(_call_of, insns)):   # where the calls are, found in C
        _add_call(m, paired, insns, i, lines[i])
    return m


def py_mix_sum(target: str, functions: list[list[str]]) -> Mix:
    """`mix_sum` in Python: the sum of `py_mix` over FUNCTIONS (each its lines), made as one:
    each distinct line is classified and counted once, times the number of its copies, and so
    is a call through no register (its slice is empty); only the functions with a call through
    a register go line by line, for its slice. A vmlinux's half is 600,000 lines, 105,000
    distinct."""
    m = Mix()
    copies = Counter(chain.from_iterable(functions))
    cache = _LINES.setdefault(target, {})
    missed = [line for line in copies if line not in cache]
    if missed:
        _classify(target, missed, cache)
    paired = get_target(target).paired_calls
    keys, sliced = Counter(), set()
    for line, n in copies.items():
        insn = cache[line]
        for key in insn.keys:
            keys[key] += n
        if insn.call and insn.target_regs:
            sliced.add(line)
        elif insn.call:
            _add_call(m, paired, [insn], 0, line, n)
    _set_counts(m, keys)
    for lines in functions:
        if not sliced.isdisjoint(lines):
            insns = list(map(cache.__getitem__, lines))
            for i in compress(range(len(lines)), map(sliced.__contains__, lines)):
                _add_call(m, paired, insns, i, lines[i])
    return m


def _set_counts(m: Mix, keys: Counter) -> None:
    """M's counts from KEYS, the `Insn.keys` of its lines counted."""
    for key, k in keys.items():
        if key == "insns":
            m.insns = k
        elif key == "padding":
            m.padding = k
        elif key == "branch":
            m.branches = k
        else:
            kind, what = key
            {"load": m.loads, "store": m.stores, "string": m.string_ops}[kind][what] = k


def _add_call(m: Mix, paired: bool, insns: list, i: int, line: str, copies: int = 1) -> None:
    """Add the call INSNS[i] (its text LINE), COPIES times, to M."""
    insn = insns[i]
    seq = call_sequence(insns, i)
    m.call_seq_insns += (len(seq) + 1) * copies
    # riscv `auipc ra,<f>; jalr ra` and loongarch `pcaddu18i $ra,<f>; jirl` are direct calls
    direct = insn.call == "direct" or (
        paired and seq and not any(insns[j].loads for j in seq)
        and any(insns[j].symbolic for j in seq))
    if direct:
        m.calls_direct += copies
        if "<stub:" in line:
            m.calls_stub += copies
    else:
        m.calls_indirect += copies


def call_sequence(insns: list, at: int) -> list[int]:
    """Indexes of the instructions before insns[at] that compute its target (a register slice);
    INSNS holds an Insn per instruction line, PAD for padding (passed over), NOT_CODE for
    labels and data."""
    need = set(insns[at].target_regs)
    seq = []
    j, steps = at - 1, 1
    while need and j >= 0 and steps <= SLICE_WINDOW:
        insn = insns[j]
        j -= 1
        if insn is PAD:
            continue
        if not insn or insn.call or insn.branch:
            break
        if insn.defs & need:
            seq.append(j + 1)
            need = (need - insn.defs) | insn.uses
        steps += 1
    return sorted(seq)
