"""The command line: a thin face over the stages.

Each verb lives in its own module here with `register(subparsers)` and
`run(args) -> int`; heavy imports happen inside `run` so `--help` and the
fast verbs start quickly.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from flagbench import __version__
from flagbench.errors import UserError

VERBS = ("doctor", "size", "asm", "build", "run", "wis", "report", "demo")


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr and exit 2, like every other bad input."""

    def error(self, message: str):  # noqa: D102 - argparse API
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="flagbench", description="Show me the numbers for a "
                           "code-generation change: size, asm and benchmarks of builds A vs B.")
    parser.add_argument("--version", action="version", version=f"flagbench {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=OneLineParser)
    for verb in VERBS:
        module = importlib.import_module(f"flagbench.cli.{verb}")
        module.register(sub).set_defaults(handler=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return args.handler(args) or 0
    except UserError as e:
        print(f"flagbench {args.verb}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"flagbench {args.verb}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `flagbench size ... | head`
        sys.stderr.close()
        return 0
