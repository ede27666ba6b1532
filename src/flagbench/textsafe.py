"""Names from ELF files and experiment files are data, not markup: make them safe for the
place they are printed. A symbol may be called `a|b<script>` or hold a newline, a backtick or
an escape sequence; a CSV cell may start like a spreadsheet formula.

>>> md_cell("a|b<script> < 85% & &amp;")
'a\\\\|b\\\\<script> < 85% & \\\\&amp;'
>>> md_code("x`y")
'`` x`y ``'
>>> csv_cell("=cmd()"), csv_cell("-12"), csv_cell(-12)
("'=cmd()", "'-12", -12)
>>> term_text("a\\x1b[31mb\\n")
'a\\\\x1b[31mb\\\\n'
>>> last_line("ssh: warning\\n  Connection refused  \\n\\n"), last_line("", "no answer")
('Connection refused', 'no answer')
"""
from __future__ import annotations

import re
import sys
import threading
from typing import Callable

# C0 controls, DEL, C1 controls: what a terminal would act on rather than print.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# A backslash escapes them (CommonMark): `<` only where it could open a tag or an autolink,
# `&` only where it could start an entity, `>` only where it would start a quote. Entities
# (&lt;) would be safe too, but a reader of the mail sees them as they are.
_MD_SPECIAL = re.compile(r"[\\|`*_\[\]]|<(?=[A-Za-z/!?])|&(?=[A-Za-z#])|^\s*>")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


_SAY_LOCK = threading.Lock()   # progress comes from worker threads too: one whole line at a time


def sayer(prefix: str, *, quiet: bool = False) -> Callable[[str], None]:
    """A function that prints progress lines "PREFIXtext" on stderr (nothing when quiet), one
    whole line at a time, controls escaped: the one way flagbench's verbs talk while they work.
    A text of several lines (a profile table) is printed as lines, the later ones indented."""
    def say(text: str) -> None:
        if quiet:
            return
        lines = text.split("\n")
        out = f"{prefix}{term_text(lines[0])}\n" + "".join(f"{' ' * len(prefix)}{term_text(line)}\n"
                                                         for line in lines[1:])
        with _SAY_LOCK:
            sys.stderr.write(out)
            sys.stderr.flush()
    return say


def term_text(text: str) -> str:
    """Control characters (escape sequences, newlines, tabs) shown escaped, the rest as is."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(lambda m: _escape(m.group(0)), text)


def _escape(ch: str) -> str:
    return {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(ch, f"\\x{ord(ch):02x}")


def md_cell(text: str) -> str:
    """TEXT as plain Markdown table-cell text: no column split, no HTML, no code span, one line."""
    text = term_text(text)
    return _MD_SPECIAL.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], text)


_INTRAWORD_UNDERSCORE = re.compile(r"(?<=[A-Za-z0-9])\\_(?=[A-Za-z0-9])")


def md_text(text: str) -> str:
    """`md_cell`, minus two escapes Markdown does not need and a plain-text reader trips
    over: `_` inside a word (GFM makes no emphasis there: x86_64, ns_per_iter) and brackets that
    cannot start a link (`[-1.2, +0.4]`).

    >>> print(md_text("x86_64 [+1.0, +2.0] a|b<script> _x_ < 85% -> y"))
    x86_64 [+1.0, +2.0] a\\|b\\<script> \\_x\\_ < 85% -> y
    >>> print(md_text("[a](b)"))
    \\[a\\](b)
    """
    text = shown_line_separators(text)
    out = _INTRAWORD_UNDERSCORE.sub("_", md_cell(text))
    if "](" not in text and "][" not in text:
        out = out.replace("\\[", "[").replace("\\]", "]")
    return out


def md_para(text: str) -> str:
    """Text outside a table: as `md_text`, and a pipe splits nothing there."""
    return md_text(text).replace("\\|", "|")


def shown_line_separators(text: str) -> str:
    """U+2028 and U+2029 written out: many editors and browsers break the line at them."""
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def md_code(text: str) -> str:
    """TEXT as a Markdown code span that survives backticks and pipes inside it (table cells too:
    GitHub splits cells on `|` even inside code, so a pipe becomes `\\|`, which it renders as `|`)."""
    text = term_text(text).replace("|", "\\|")
    if "`" not in text:
        return f"`{text}`"
    fence = "`" * (max(len(r) for r in re.findall(r"`+", text)) + 1)
    return f"{fence} {text} {fence}"


def csv_cell(value):
    """A CSV value a spreadsheet shows as text: a string starting with = + - @ (or a tab or CR)
    gets a leading apostrophe. Numbers are left as numbers."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def last_line(text: str, default: str = "") -> str:
    """The last line of TEXT that is not blank, stripped (a program's stderr as one line of a
    message: the cause comes last), or DEFAULT."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else default
