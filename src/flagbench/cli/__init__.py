"""The command line: a thin face over the stages.

Each verb lives in its own module here with `register(subparsers)` and
`run(args) -> int`. Only the chosen verb's module is imported (and its heavy
imports happen inside `run`), so `flagbench size` on two small files starts fast.
"""
import atexit
import os
import sys

from flagbench import __version__

VERBS = {   # verb -> the line `flagbench --help` shows without importing the verb
    "doctor": "list compilers, disassemblers and runners per target",
    "size": "symbol, section and padding size diff of two ELF files (bloat-o-meter compatible)",
    "asm": "per-function disassembly diff and instruction mix of two builds",
    "build": "compile an experiment's variants for its targets and compilers",
    "run": "build an experiment's variants and run its benchmarks",
    "wis": "run a will-it-scale testcase (processes and threads, 1..N tasks)",
    "report": "print the tables of a stored run (default: the latest)",
    "model": "a modelled cycle band (llvm-mca x qemu block counts) for A and B, beside exact counts",
    "profile": "per-symbol profiles (exact counts, perf time) of an experiment's micro benches, A vs B",
    "bisect": "the first commit where a metric moves, or the objects that carry a change",
    "demo": "run the bundled case studies end to end and write their report",
    "box": "start, stop or show the qemu kexec box (a host to try --host on)",
    "series": "each commit of a git series built and compared: size, asm, exact counts",
    "check": "a patch or series on stdin measured and judged: b4's or patchwork's check JSON",
    "watch": "follow branches: every new commit measured, changes found and reported",
}


def is_experiment(path) -> bool:
    """A verb's first argument names an experiment (a directory holding experiment.toml, or a
    .toml file), not an ELF file to compare (`size`, `asm`)."""
    return os.path.isdir(path) or os.path.splitext(str(path))[1] == ".toml"


def build_parser(argv: list[str] | None = None):
    import importlib   # here: it imports warnings, and `flagbench size`'s quick path needs neither

    from flagbench.cli.parser import OneLineParser
    parser = OneLineParser(prog="flagbench", description="Show me the numbers for a "
                           "code-generation change: size, asm and benchmarks of builds A vs B.")
    parser.add_argument("--version", action="version", version=f"flagbench {__version__}")
    sub = parser.add_subparsers(dest="verb", metavar="VERB", parser_class=OneLineParser)
    args = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in args if not a.startswith("-")), None)
    for verb, line in VERBS.items():
        if verb == chosen:
            module = importlib.import_module(f"flagbench.cli.{verb}")
            module.register(sub).set_defaults(handler=module.run)
        elif chosen not in VERBS:   # the others only for `flagbench --help` and a wrong verb's error
            sub.add_parser(verb, help=line)
    return parser


def main(argv: list[str] | None = None) -> int:
    return _main(argv)[1]


# Verbs whose whole work is written to stdout and stderr when they return (no file, no child,
# no server left): after them the process may end without the interpreter's teardown. (asm
# would be one, but what it imports registers atexit callbacks: logging's, weakref.finalize's.)
NO_TEARDOWN = frozenset({"size"})


def process_main() -> None:
    """main() as the whole process, which it ends (bin/flagbench, `python -m flagbench`).

    After a verb in NO_TEARDOWN the process ends at once (os._exit) once its streams are
    flushed: the interpreter's teardown frees every object one by one, memory the kernel takes
    back whole: 7 % of the instructions of `flagbench size` on a vmlinux pair. Not when an
    atexit callback or another thread is waiting for that teardown, nor when a stream cannot be
    flushed (the ordinary exit then reports it, as it always has)."""
    verb, code = _main(None)
    if verb in NO_TEARDOWN and atexit._ncallbacks() == 0 and _one_thread():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):   # a closed pipe or stream: the ordinary exit reports it
            raise SystemExit(code) from None
        os._exit(code)
    raise SystemExit(code)


def _one_thread() -> bool:
    threading = sys.modules.get("threading")
    return threading is None or threading.active_count() == 1


def _main(argv: list[str] | None) -> tuple[str | None, int]:
    """(the verb run, its exit status)."""
    args = sys.argv[1:] if argv is None else argv
    verb, handler = "size", _quick(args)
    if handler is None:
        parser = build_parser(argv)
        ns = parser.parse_args(argv)
        if not getattr(ns, "handler", None):
            parser.print_help()
            return None, 2
        verb, handler = ns.verb, lambda: ns.handler(ns)
    try:
        return verb, handler() or 0
    except _user_error() as e:   # its text may hold a compiler's or a commit's: controls escaped, line by line
        from flagbench.textsafe import term_text
        print(f"flagbench {verb}: " + "\n".join(map(term_text, str(e).split("\n"))), file=sys.stderr)
        return verb, 2
    except KeyboardInterrupt as e:   # procs.Terminated carries the signal: exit 128 + it
        print(f"flagbench {verb}: interrupted", file=sys.stderr)
        return verb, getattr(e, "exit_status", 130)
    except BrokenPipeError:  # `flagbench size ... | head`
        sys.stderr.close()
        return verb, 0


def _user_error() -> type:
    """errors.UserError, imported once something was raised (an except clause is evaluated only
    then): `flagbench size`'s quick path, when nothing goes wrong, needs no flagbench.errors,
    whose classes cost a fiftieth of the command on a vmlinux pair."""
    from flagbench.errors import UserError
    return UserError


def _quick(args: list[str]):
    """`flagbench size OLD NEW` in its plain forms, without argparse (whose import is a tenth of
    that command on a vmlinux pair): a handler, or None for the parser to take the command."""
    if args[:1] != ["size"]:
        return None
    from flagbench.cli import size
    return size.quick(args[1:])
