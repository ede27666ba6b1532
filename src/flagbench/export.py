"""One exporter registry: every output format flagbench writes is declared here once, with what
it is for and how a piece of text from outside (a commit subject, a compiler's error, a symbol)
is made safe in it; a verb names the formats it writes (`choices`) and dispatches through
`render`, so a format's name, help and escaping live in one place.

>>> choices("text", "md")
('text', 'md')
>>> render("md", {"text": lambda: "t", "md": lambda: "m"})
'm'
>>> safe("md", "a|b<script>"), safe("text", "bell\\x07")
('a\\\\|b\\\\<script>', 'bell\\\\x07')
"""

TYPE_CHECKING = False   # typing, textsafe and html are imported on first use: `size` must start fast
if TYPE_CHECKING:
    from typing import Callable, Mapping


def _term_text(text: str) -> str:
    from flagbench.textsafe import term_text
    return term_text(text)


def _md_cell(text: str) -> str:
    from flagbench.textsafe import md_cell
    return md_cell(text)


def _csv_cell(text: str) -> str:
    from flagbench.textsafe import csv_cell
    return str(csv_cell(text))


def _html_escape(text: str) -> str:
    import html
    return html.escape(text)


class Format:   # a plain class, not a dataclass (another import at start-up)
    __slots__ = ("name", "what", "safe")

    def __init__(self, name: str, what: str, safe: "Callable[[str], str]"):
        self.name = name
        self.what = what                  # for --help
        self.safe = safe                  # outside text as it may appear in this format


FORMATS: dict[str, Format] = {f.name: f for f in (
    Format("text", "plain text for a terminal or a mail, within 100 columns", _term_text),
    Format("md", "Markdown tables, to paste into a mail or a review", _md_cell),
    Format("json", "every number, for scripts", lambda text: text),
    Format("csv", "one row per table row, for a spreadsheet", _csv_cell),
    Format("html", "one self-contained page with plots (inline SVG, nothing fetched)", _html_escape),
    Format("bom", "byte for byte what the kernel's scripts/bloat-o-meter prints", _term_text),
    Format("b4", "b4 review's check JSON (a check command's output)", lambda text: text),
    Format("patchwork", "the check a CI posts to patchwork, as JSON", lambda text: text),
    Format("checkpatch", "checkpatch's lines, which b4 am/prep --check reads", _term_text),
)}


def choices(*names: str) -> tuple[str, ...]:
    """The formats a verb writes, each one declared here."""
    unknown = [n for n in names if n not in FORMATS]
    if unknown:
        raise ValueError(f"format {unknown[0]!r} is not declared in export.FORMATS")
    return names


def described(names: tuple[str, ...]) -> str:
    """--format's help: each format and what it is for."""
    return "; ".join(f"{n}: {FORMATS[n].what}" for n in names).replace("%", "%%")


def safe(fmt: str, text: str) -> str:
    return FORMATS[fmt].safe(text)


def render(fmt: str, renderers: "Mapping[str, Callable[[], str]]") -> str:
    """The output of the renderer for FMT; a format the verb does not write is bad input."""
    if fmt not in renderers:
        from flagbench.errors import UserError   # not at start-up: `size` imports no errors unless one is raised
        raise UserError(f"--format {fmt}: this writes {', '.join(renderers)}")
    return renderers[fmt]()
