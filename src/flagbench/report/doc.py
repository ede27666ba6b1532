"""A report as a list of blocks (headings, paragraphs, tables, code, figures), and the two
exporters that write it: Markdown (what a maintainer pastes) and one self-contained HTML file
(tables plus inline SVG plots; no script, nothing fetched).

Every piece of text is escaped by the exporter that writes it: md cells through
`textsafe.md_cell` (a symbol named `a|b<script>` stays one cell and stays text), HTML through
`html.escape`. Anchors are made by `cells.slug` and hold only [a-z0-9-].
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Union

from flagbench.textsafe import md_para, md_text, shown_line_separators  # noqa: F401 (md_para: the report's name)


@dataclass(frozen=True)
class Link:
    text: str
    anchor: str


Inline = Union[str, Link]


@dataclass
class Heading:
    level: int
    text: str
    anchor: str | None = None


@dataclass
class Para:
    parts: list[Inline]
    anchor: str | None = None


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Grid:
    """A table: an optional bold title and anchor, a header, rows, notes below."""
    header: list[str]
    rows: list[list]              # cells: text, a Link, or a list of those
    title: str | None = None
    anchor: str | None = None
    notes: list[str] = field(default_factory=list)
    align: str = ""          # per column "l" or "r" (default: first column left, the rest right)
    keys: int = 1            # leading columns that name a row: repeated when a wide table is split


@dataclass
class Code:
    lines: list[str]
    lang: str = ""
    marks: list[str] | None = None   # per line, a side-by-side diff's mark (" ", "|", "<", ">"): html colours it


@dataclass
class Figure:
    """HTML only: a plot (SVG or panels made by plots.py); Markdown readers have the table."""
    body: str
    caption: str = ""


Block = Union[Heading, Para, Bullets, Grid, Code, Figure]


def note_blocks(notes: list[str], facts: list[str] = ()) -> list[Block]:
    """A run's notes (the A/A noise floor, what a guest measured) and facts as bullets; a note of
    several lines (a kernel profile table) as its first line and the rest as preformatted text,
    never one line with its newlines escaped.

    >>> [type(b).__name__ for b in note_blocks(["floor 1.0", "profile:\\n  a 1\\n  b 2"], ["built"])]
    ['Bullets', 'Para', 'Code']
    """
    out: list[Block] = []
    single = [f"note: {n}" for n in notes if "\n" not in n] + list(facts)
    if single:
        out.append(Bullets(single))
    for n in notes:
        if "\n" in n:
            first, *rest = n.split("\n")
            out += [Para([f"note: {first}"]), Code(rest)]
    return out


# -- Markdown -----------------------------------------------------------------------------------

def _md_inline(x, text=md_text) -> str:
    if isinstance(x, list):      # a cell of several pieces (text and links)
        return "".join(_md_inline(p, text) for p in x)
    if isinstance(x, Link):
        return f"[{text(x.text)}](#{x.anchor})"
    return text(x)


def _md_anchor(anchor: str | None) -> list[str]:
    return [f'<a id="{anchor}"></a>'] if anchor else []


WIDTH = 100    # a reply is read in a mail client at 72-100 columns: what flagbench writes fits 100
# a word that would start a block if a wrapped line began with it (a list, a heading, a quote)
_BLOCK_START = re.compile(r"^(?:[-+*=>]+|\d+[.)]|#+)$")
_UNIT = re.compile(r"^(?:%|B|pt|ns|s)\W*$")     # stays beside its number: "+72.37 %)"


def fill(text: str, width: int = WIDTH, first: str = "", rest: str = "") -> list[str]:
    """TEXT as lines of at most WIDTH columns (FIRST and REST prefix the first and the later
    lines), broken at " · " between parts where it has them (a run header never breaks inside
    a CPU name), else at spaces; never before a word that would start a Markdown block. A
    word longer than a line stays whole.

    >>> fill("run 1 · exp (abc) · AMD EPYC 7B13 64-Core · Linux 6.1", 30)
    ['run 1 · exp (abc)', 'AMD EPYC 7B13 64-Core', 'Linux 6.1']
    >>> fill("a b - c", 3)
    ['a', 'b -', 'c']
    """
    sep = " · "
    lines: list[str] = []
    words: list[str] = []          # the current line's words ("·" between parts)
    prefix = first

    def fits(ws: list[str]) -> bool:
        return len(prefix) + len(" ".join(ws)) <= width

    def flush() -> None:
        nonlocal prefix
        if words:
            lines.append(prefix + " ".join(words))
            prefix = rest
            words.clear()

    for i, part in enumerate(text.split(sep)):
        part_words = part.split(" ")
        if i and words:
            if fits(words + ["·"] + part_words):
                words += ["·"] + part_words
                continue
            flush()                # a new line at the part boundary, the "·" dropped
        for w in part_words:
            if words and not fits(words + [w]):
                if (_BLOCK_START.match(w) or _UNIT.match(w)) and len(words) > 1:   # take the word before along
                    before = words.pop()
                    flush()
                    words.append(before)
                else:
                    flush()
            words.append(w)
    flush()
    return lines or [first]


class Markdown:
    """Blocks as GitHub-flavoured Markdown that reads as plain text too and fits WIDTH columns:
    paragraphs and notes wrapped; a table too wide takes its links as references, then drops
    its padding, then becomes one record a row."""

    def __init__(self, width: int = WIDTH):
        self.width = width
        self._refs: dict[str, str] = {}     # anchor -> its reference label ([t3]: #anchor)

    def render(self, blocks: list[Block]) -> str:
        out: list[str] = []
        for b in blocks:
            if isinstance(b, Heading):
                out += _md_anchor(b.anchor) + [f"{'#' * b.level} {md_para(b.text)}", ""]
            elif isinstance(b, Para):
                out += _md_anchor(b.anchor) + fill("".join(_md_inline(p, md_para) for p in b.parts), self.width)
                out += [""]
            elif isinstance(b, Bullets):
                out += [line for i in b.items for line in fill(md_para(i), self.width, "- ", "  ")] + [""]
            elif isinstance(b, Grid):
                out += self._grid(b)
            elif isinstance(b, Code):
                longest = max([len(m) for line in b.lines for m in re.findall(r"`+", line)] + [2])
                fence = "`" * (longest + 1)
                out += [fence + b.lang] + b.lines + [fence, ""]
        return "\n".join(out).rstrip("\n") + "\n"

    def _grid(self, g: Grid) -> list[str]:
        out = _md_anchor(g.anchor)
        if g.title:
            bench, _, rest = g.title.partition(" · ")
            out += fill(f"**{md_text(bench)}**" + (f" · {md_text(rest)}" if rest else ""), self.width) + [""]
        header = [md_text(h) for h in g.header]
        align = g.align or "l" + "r" * (len(header) - 1)
        body = [[_md_inline(c) for c in row] for row in g.rows]
        table = _md_table(header, body, align, pad=True)
        refs: list[str] = []
        if _wider(table, self.width):   # the links' anchors take most of a cell: as references
            body = [[self._ref_inline(c, refs) for c in row] for row in g.rows]
            table = _md_table(header, body, align, pad=True)
        if _wider(table, self.width):   # the columns in groups, each beside the row's key columns
            table = _split_table(header, body, align, g.keys, self.width)
        if _wider(table, self.width):
            table = _md_table(header, body, align, pad=False)
        if _wider(table, self.width):   # one record a row: "- first: k: v; k: v", wrapped
            keys = max(1, min(g.keys, len(header) - 1))
            table = [line for row in body for line in fill(
                f"**{' '.join(row[:keys])}**: " + "; ".join(f"{h}: {c}" for h, c in zip(header[keys:], row[keys:])
                                                           if c not in ("", "-")),
                self.width, "- ", "  ")]
        out += table + ([""] + refs if refs else [])   # a blank line first: else GFM reads them as rows
        out += [line for n in g.notes for line in fill(md_para(n), self.width, "- ", "  ")]
        return out + [""]

    def _ref_inline(self, x, refs: list[str]) -> str:
        """A cell with its links as reference links ([text][t1]), their definitions added to REFS."""
        if isinstance(x, list):
            return "".join(self._ref_inline(p, refs) for p in x)
        if isinstance(x, Link):
            if x.anchor not in self._refs:
                self._refs[x.anchor] = f"t{len(self._refs) + 1}"
                refs.append(f"[{self._refs[x.anchor]}]: #{x.anchor}")
            elif f"[{self._refs[x.anchor]}]: #{x.anchor}" not in refs:
                refs.append(f"[{self._refs[x.anchor]}]: #{x.anchor}")
            return f"[{md_text(x.text)}][{self._refs[x.anchor]}]"
        return md_text(x)


def _md_table(header: list[str], body: list[list[str]], align: str, pad: bool) -> list[str]:
    widths = [max(len(x) for x in col) if pad else 1 for col in zip(header, *body)]

    def line(xs):
        return "| " + " | ".join(x.ljust(w) if a == "l" else x.rjust(w)
                                 for x, w, a in zip(xs, widths, align)) + " |"
    rule = "|" + "|".join(("-" * (w + 2)) if a == "l" else ("-" * (w + 1) + ":")
                          for w, a in zip(widths, align)) + "|"
    return [line(header), rule] + [line(r) for r in body]


def _split_table(header: list[str], body: list[list[str]], align: str, keys: int, width: int) -> list[str]:
    """The table as several, each the KEYS columns and as many of the others as fit WIDTH
    (a table whose one column with its keys is too wide comes back too wide)."""
    keys = min(max(keys, 0), len(header) - 1)
    rest = list(range(keys, len(header)))
    out: list[str] = []
    while rest:
        take = 1
        while take < len(rest) and not _wider(_pick(header, body, align, keys, rest[:take + 1]), width):
            take += 1
        out += ([""] if out else []) + _pick(header, body, align, keys, rest[:take])
        rest = rest[take:]
    return out


def _pick(header, body, align, keys, columns) -> list[str]:
    cols = list(range(keys)) + columns
    return _md_table([header[i] for i in cols], [[r[i] for i in cols] for r in body],
                     "".join(align[i] for i in cols), pad=True)


def _wider(lines: list[str], width: int) -> bool:
    return any(len(line) > width for line in lines)


# -- HTML ---------------------------------------------------------------------------------------

def esc(text) -> str:
    """HTML text: escaped, control characters shown as \\xNN."""
    s = "".join(c if c >= " " or c in "\n\t" else f"\\x{ord(c):02x}" for c in str(text))
    return html.escape(shown_line_separators(s), quote=True)


STYLE = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1b1b1b;margin:0;background:#fff}
main{max-width:1180px;margin:0 auto;padding:16px 28px 48px}
h1{font-size:24px;margin:8px 0 12px}h2{font-size:20px;margin:36px 0 8px;padding-top:8px;border-top:2px solid #ddd}
h3{font-size:16px;margin:24px 0 6px}h4{font-size:14px;margin:16px 0 4px}
table{border-collapse:collapse;margin:6px 0 4px;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid #e4e4e4;text-align:right;white-space:nowrap}
th{background:#f3f3f3;font-weight:600;position:sticky;top:0}
td.l,th.l{text-align:left}td.l{white-space:normal;max-width:560px}tr:hover td{background:#f7faff}
.title{font-weight:600;margin:18px 0 2px}.title span{font-weight:400;color:#555}
.notes{margin:2px 0 10px;padding-left:20px;color:#555;font-size:13px}
pre{background:#f6f8fa;border:1px solid #e1e4e8;padding:8px 10px;overflow:auto;font-size:12.5px;line-height:1.35;max-height:560px}
.figure{margin:10px 0 18px}.panels{display:flex;flex-wrap:wrap;gap:10px}
svg.plot{background:#fff;border:1px solid #e4e4e4;border-radius:4px;max-width:100%;height:auto}
.legend{display:flex;flex-wrap:wrap;gap:4px 16px;margin:6px 0 0;font-size:13px}
.key{display:inline-flex;align-items:center;gap:6px}.swatch{width:14px;height:4px;display:inline-block;border-radius:2px}
.caption{color:#555;font-size:13px;margin:4px 0}
pre.sbs span{display:inline-block;min-width:100%}.chg{background:#fff5cc}.del{background:#ffe3e3}.add{background:#e3f7e3}
a{color:#0b5cad;text-decoration:none}a:hover{text-decoration:underline}
.wrap{overflow-x:auto}
"""


class Html:
    """Blocks as one self-contained HTML page: inline CSS and SVG, no script, no external URL."""

    def render(self, blocks: list[Block], title: str = "flagbench report") -> str:
        body = "\n".join(self._block(b) for b in blocks)
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n"
                f"<body><main>\n{body}\n</main></body></html>\n")

    def _block(self, b: Block) -> str:
        if isinstance(b, Heading):
            ident = f' id="{b.anchor}"' if b.anchor else ""
            return f"<h{b.level}{ident}>{esc(b.text)}</h{b.level}>"
        if isinstance(b, Para):
            ident = f' id="{b.anchor}"' if b.anchor else ""
            return f"<p{ident}>{''.join(self._inline(p) for p in b.parts)}</p>"
        if isinstance(b, Bullets):
            return "<ul class=\"notes\">" + "".join(f"<li>{esc(i)}</li>" for i in b.items) + "</ul>"
        if isinstance(b, Grid):
            return self._grid(b)
        if isinstance(b, Code):
            if not b.marks:
                return f"<pre>{esc(chr(10).join(b.lines))}</pre>"
            kind = {"|": "chg", "<": "del", ">": "add"}
            return "<pre class=\"sbs\">" + "\n".join(
                f'<span class="{kind[m]}">{esc(line)}</span>' if m in kind else esc(line)
                for line, m in zip(b.lines, b.marks)) + "</pre>"
        if isinstance(b, Figure):
            caption = f'<div class="caption">{esc(b.caption)}</div>' if b.caption else ""
            return f'<div class="figure">{caption}{b.body}</div>'
        raise TypeError(f"not a report block: {b!r}")

    @staticmethod
    def _inline(x) -> str:
        if isinstance(x, list):
            return "".join(Html._inline(p) for p in x)
        if isinstance(x, Link):
            return f'<a href="#{x.anchor}">{esc(x.text)}</a>'
        return esc(x)

    def _grid(self, g: Grid) -> str:
        align = g.align or "l" + "r" * (len(g.header) - 1)
        out = []
        if g.title:
            bench, _, rest = g.title.partition(" · ")
            ident = f' id="{g.anchor}"' if g.anchor else ""
            out.append(f'<div class="title"{ident}>{esc(bench)}' + (f" <span>· {esc(rest)}</span>" if rest else "")
                       + "</div>")
        elif g.anchor:
            out.append(f'<div id="{g.anchor}"></div>')
        head = "".join(f'<th class="{a}">{esc(h)}</th>' for h, a in zip(g.header, align))
        rows = "".join("<tr>" + "".join(f'<td class="{a}">{self._inline(c)}</td>' for c, a in zip(r, align))
                       + "</tr>" for r in g.rows)
        out.append(f'<div class="wrap"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>')
        if g.notes:
            out.append("<ul class=\"notes\">" + "".join(f"<li>{esc(n)}</li>" for n in g.notes) + "</ul>")
        return "\n".join(out)
