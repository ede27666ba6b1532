"""The command line's argparse classes, imported only when a command needs the parser
(`flagbench size OLD NEW` does not: `cli._quick`)."""
from __future__ import annotations

import argparse
import os
import sys


class TerminalWidthFormatter(argparse.HelpFormatter):
    """argparse's help formatter, sized from COLUMNS or the terminal without importing shutil
    (argparse makes one per add_argument, and shutil's import is a tenth of the start-up of
    `flagbench size`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width=None):
        if width is None:
            try:
                width = int(os.environ.get("COLUMNS", "")) - 2
            except ValueError:
                try:
                    width = os.get_terminal_size(sys.__stdout__.fileno()).columns - 2
                except (OSError, AttributeError, ValueError):
                    width = 78
        super().__init__(prog, indent_increment, max_help_position, width)


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr and exit 2, like every other bad input."""

    def __init__(self, *args, formatter_class=TerminalWidthFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def error(self, message: str):  # noqa: D102 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")
