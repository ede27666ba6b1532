"""`python3 -m flagbench.kbuild.unpack SOURCE...`: the Debian kernel trees a [kernel] source names
(debian:6.1, ...) unpacked into the cache as a build would unpack them (`source.base_tree`),
with nothing but the standard library: the system's python3 runs it before the venv exists.

`make demo` runs it beside pip on a fresh machine (Makefile: `kernel-tree`): unpacking Debian's
6.1 tree (xz and 80,000 files, about a minute and a half here) then overlaps making the venv,
instead of coming after it inside the demo. A tree already unpacked costs a stat.
"""
import sys

from flagbench import procs
from flagbench.errors import UserError
from flagbench.kbuild import source
from flagbench.kernelspec import DEBIAN_SOURCES


def main(argv: list[str]) -> int:
    procs.install()   # SIGINT/SIGTERM end tar too: nothing outlives this process
    try:
        for name in argv:
            if name not in DEBIAN_SOURCES:
                raise UserError(f"{name}: not a Debian kernel source ({', '.join(DEBIAN_SOURCES)})")
            source.base_tree(name, say=lambda line: print(f"flagbench: {line}", file=sys.stderr, flush=True))
    except UserError as e:
        print(f"flagbench: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        return getattr(e, "exit_status", 130)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
