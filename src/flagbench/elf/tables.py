"""Each member's nm-listed symbols as plain columns (lists): the symbol reader of `flagbench size`
and of the run stage's symbol checks.

Per member, the section headers, the symbol table and the two string tables are each read with
one `pread` and checked (`sections`: bounds, types); the loops over their entries run in C
(`_symtab.c`, which says why), fed with nm's rules as lookup tables built from
`symbols.symbol_letter` and `sections.letter`. Tests compare the result with GNU nm on every
target.
"""
from __future__ import annotations

from collections import namedtuple

from flagbench.elf import _symtab, sections
from flagbench.elf.constants import COMMON_INDICES, SHN_COMMON
from flagbench.elf.files import Input, Member, open_input
from flagbench.elf.letters import LETTER_CODES, _BASE_CODES, _SYMBOL_LETTERS, _name_code  # noqa: F401
from flagbench.errors import UserError

# bloat-o-meter's table of one input, filled by `read_member` (`_summary.c`): public here.
Summary = _symtab.Summary

# nm's rules as the C loops take them (`_symtab.c`: struct rules): LETTERS, the letter (0: not
# listed) by st_info << 4 | section code; BASE, a section's code by flags & (WRITE|ALLOC|EXEC) |
# NOBITS << 3; NAME_CODE(type, flags, name), the code where the name decides; COMMON, the reserved
# section indices nm files under common. (collections, not typing: typing costs every start.)
Rules = namedtuple("Rules", "letters base name_code common")


_RULES: dict[int, Rules] = {}   # (a dict, not functools.cache: functools is a start-up cost of its own)


def rules(machine: int) -> Rules:
    got = _RULES.get(machine)
    if got is None:
        got = _RULES[machine] = Rules(_SYMBOL_LETTERS, _BASE_CODES, _name_code,
                                      (SHN_COMMON, *COMMON_INDICES.get(machine, ())))
    return got


class MemberTables:
    """The symbols nm lists of one member (defined, not section or file symbols), sized or not, in
    symbol-table order: `names`, `letters` (a str, one character per symbol), `sizes`; with FULL
    also `values` (Thumb bit cleared), `sections` (section index, -1 for common), `gaps` (the
    padding after each symbol in code), and `covered` / `padding` (the member's code bytes in
    sized symbols and in padding)."""
    __slots__ = ("member", "names", "letters", "sizes", "values", "sections", "gaps", "covered", "padding",
                 "_view")

    def section_sizes(self, groups: tuple) -> tuple[dict[str, int], int, int, int, int]:
        """({group: bytes}, code, read-only data, data, no-contents bytes) of the allocated
        sections; GROUPS as `_symtab.section_sizes` takes them."""
        try:
            return _symtab.section_sizes(self._view, groups)
        except ValueError as e:
            raise UserError(f"{self.member.name}: corrupt ELF ({e})") from None


def read_member(inp: Input, m: Member, full: bool = True, sized_only: bool = False,
                summaries: tuple | None = None) -> MemberTables | None:
    """M's listed symbols (only the sized ones with SIZED_ONLY); None when M has no symbol table.
    With SUMMARIES (`Summary` tables) the sized symbols go there instead, and only the
    member's code totals (and section sizes) are left here. Damaged tables are a UserError
    naming the member."""
    found = member_view(inp, m)
    if found is None:
        return None
    _, view = found
    try:
        (names, letters, sizes, values, secs, gaps, covered, padding) = _symtab.symbols(
            view, rules(m.machine), sized_only=sized_only, full=full, summaries=summaries)
    except ValueError as e:
        raise UserError(f"{m.name}: corrupt ELF ({e})") from None
    t = MemberTables()
    t.member, t.names, t.letters, t.sizes = m, names, letters and letters.decode("latin-1"), sizes
    t.values, t.sections, t.gaps, t.covered, t.padding = values, secs, gaps, covered, padding
    t._view = view
    return t


def member_view(inp: Input, m: Member) -> tuple[sections.Headers, sections.View] | None:
    """M's section headers and the View of its symbol table; None when M has no symbol table."""
    hdrs = sections.read_headers(inp, m)
    symtab = sections.symtab_index(hdrs)
    if symtab is None or hdrs.size[symtab] < (24 if m.is64 else 16):
        return None
    return hdrs, sections.view(inp, m, hdrs, sections.section_name_table(inp, m, hdrs), symtab)


def read_members(inp: Input, full: bool = True, sized_only: bool = False, summaries: tuple | None = None):
    """read_member over every member that has a symbol table; UserError when none has one."""
    found = False
    for m in inp.members:
        t = read_member(inp, m, full, sized_only, summaries)
        if t is not None:
            found = True
            yield t
    if not found:
        raise UserError(f"{inp.path}: no symbol table (stripped?)")


def sized_symbols(source) -> list[tuple[str, str, int]]:
    """(name, nm letter, size) of every symbol `nm --size-sort` lists, in symbol-table order;
    SOURCE is a path (opened and closed here) or an open Input."""
    inp = open_input(str(source)) if not isinstance(source, Input) else source
    try:
        out = []
        for t in read_members(inp, full=False, sized_only=True):
            out += zip(t.names, t.letters, t.sizes)
        return out
    finally:
        if inp is not source:
            inp.close()
