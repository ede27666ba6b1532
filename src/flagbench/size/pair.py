"""Read the two inputs of `flagbench size` at once: a forked child reads OLD while this process
reads NEW (most of the work is per file, in Python; `forked.Child`); or, where the work is C that
lets go of the GIL, a thread reads OLD (`both_threaded`).

The child sends its result back with `marshal` (plain data; `flagbench size`'s is bytes and ints:
the fastest serialiser in the standard library, no import cost). OLD's error wins over NEW's, as
in a sequential run. Small inputs are read one after the other: there a fork (and the
copy-on-write faults of a forked Python) costs more than it saves: a vmlinux with 30,000 symbols
reads in about 4 ms a side, while forking costs about 8 ms here.
"""
import marshal
import os

from flagbench.errors import UserError

# Below this much symbol table (an ELF file's; an archive counts its whole size, as reading
# every member's headers to find out would cost what it saves) forking does not pay.
PARALLEL_SYMTAB_BYTES = 2 << 20
# With the code outside symbols classified (every format but bom) a side costs more: fork sooner.
PARALLEL_SYMTAB_BYTES_EXTRAS = 256 << 10
PARALLEL_ARCHIVE_BYTES = 16 << 20


def both(func, old, new, *args, parallel: bool | None = None, threshold: int = PARALLEL_SYMTAB_BYTES):
    """(func(old, *args), func(new, *args)); OLD in a forked child when PARALLEL (None: when
    either input is large). FUNC's result must be marshal-able."""
    if parallel is None:
        parallel = _large(old, threshold) or _large(new, threshold)
    if not parallel or not hasattr(os, "fork"):
        return func(old, *args), func(new, *args)
    from flagbench.forked import Child
    child = Child(_without, func, old, new, *args, dumps=marshal.dumps)
    old.close()
    try:
        mine, error = None, None
        try:
            mine = func(new, *args)
        except UserError as e:
            error = e
        theirs = child.result(marshal.loads)   # OLD's error, raised here, wins over NEW's
    finally:
        child.kill()   # interrupted, or an unexpected error here: do not leave the child behind
    if error is not None:
        raise error
    return theirs, mine


def _without(func, inp, other, *args):
    """func(INP, *args) in the child, OTHER (this process's input) closed there first."""
    other.close()
    return func(inp, *args)


def _large(inp, threshold: int = PARALLEL_SYMTAB_BYTES) -> bool:
    """Whether reading INP's symbols takes long enough to pay for a fork."""
    if inp.kind == "archive":
        return inp.size >= PARALLEL_ARCHIVE_BYTES
    from flagbench.elf import sections
    from flagbench.elf.constants import SHT_SYMTAB
    hdrs = sections.headers(inp, inp.members[0])
    return sum(h[sections.SIZE] for h in hdrs if h[sections.TYPE] == SHT_SYMTAB) >= threshold


def both_threaded(func, old: tuple, new: tuple) -> None:
    """func(*old) on a thread of its own while func(*new) runs here: for work in C that lets go of
    the GIL (`_symtab.code_holes`). OLD's error wins, as in a sequential run. (`_thread`:
    `threading` and the functools it imports cost more than a vmlinux's holes.)"""
    import _thread
    errors: list[BaseException] = []
    finished = _thread.allocate_lock()
    finished.acquire()

    def first() -> None:
        try:
            func(*old)
        except BaseException as e:  # noqa: BLE001 - raised below, in the calling thread
            errors.append(e)
        finally:
            finished.release()
    _thread.start_new_thread(first, ())
    try:
        func(*new)
    finally:
        with finished:
            if errors:
                raise errors[0]
