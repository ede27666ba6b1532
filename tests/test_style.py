"""One C indentation style: kernel style, for every tracked *.c and *.h file.

The rule: outside block comments, a line's indentation is tabs, optionally followed by fewer
than 8 spaces that align a continuation line (an argument under the one above it); a line
never starts with a space and never has a space before a tab in its indentation. Inside a
block comment anything goes (the ` * ` of a comment, a continuation aligned with spaces).
"""
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INDENT = re.compile(r"(\t+ {0,7})?(\S|$)")   # matched at the start of each line
CODE_TOKENS = re.compile(r'/\*|//|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'')   # strings skipped whole


def _ends_in_comment(line: str, in_comment: bool) -> bool:
    """Whether a block comment is open at the end of `line`, given whether one was at its start."""
    i = 0
    while i < len(line):
        if in_comment:
            end = line.find("*/", i)
            if end < 0:
                return True
            in_comment, i = False, end + 2
            continue
        m = CODE_TOKENS.search(line, i)
        if m is None or m.group() == "//":
            return False
        in_comment, i = m.group() == "/*", m.end()
    return in_comment


def space_indented(text: str) -> list[int]:
    """The numbers of the lines outside block comments whose indentation breaks the rule."""
    bad, in_comment = [], False
    for number, line in enumerate(text.split("\n"), 1):
        if not in_comment and not INDENT.match(line):
            bad.append(number)
        in_comment = _ends_in_comment(line, in_comment)
    return bad


def test_the_rule_catches_space_indentation():
    assert space_indented("void f(void)\n{\n    g();\n}\n") == [3]
    assert space_indented("void f(void)\n{\n \tg();\n}\n") == [3]                  # space before a tab
    assert space_indented("void f(void)\n{\n\t\t        g();\n}\n") == [3]          # 8 spaces: a tab
    assert space_indented('void f(void)\n{\n\tg("/* no comment");\n    h();\n}\n') == [4]
    assert space_indented("/* a\n * b\n   c */\nint f(int a,\n\t  int b)\n{\n\treturn a; /* x */\n}\n") == []
    assert space_indented("int f(void) /* a\n   b */\n{\n    return 0;\n}\n") == [4]


def tracked_c_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files", "-z", "*.c", "*.h"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: no list of tracked files")
    return [ROOT / name for name in out.split("\0") if name]


def test_tracked_c_is_kernel_style():
    files = tracked_c_files()
    assert any(f.name == "syscount.c" for f in files)   # the list is the project's C, not empty
    bad = [f"{f.relative_to(ROOT)}:{n}" for f in files for n in space_indented(f.read_text())]
    assert not bad, "indented with spaces (kernel style: tabs): " + ", ".join(bad[:20])
