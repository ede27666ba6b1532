"""The one exception type the CLI turns into a single stderr line and exit 2, and the words
for what is wrong with a file the user named."""
import os
import stat


class UserError(Exception):
    """Bad input: a missing file, a broken experiment, an unknown target.

    The message is printed as one line, without a traceback; exit status 2.
    """


class DiskFull(UserError):
    """A tool could not write because a disk is full: not the experiment's fault, so nothing
    adds an experiment's FILE:LINE to it."""


class StepFailed(UserError):
    """A bisection step's commit built but its bench did not run to the end (a crash, a timeout,
    a kernel that does not boot): the step is skipped like a commit that does not build."""


class PlaceLost(UserError):
    """A place (an ssh host, a kexec'd kernel, a board) failed, not the program that ran there:
    the engine fails the cell as one to measure again when the same run is resumed."""

    RESUME = "; run again to resume"    # how the failure reads, and how a resumed run knows it

    def __init__(self, why: str):
        super().__init__(why if why.endswith(self.RESUME) else why + self.RESUME)

    @classmethod
    def was(cls, reason: str | None) -> bool:
        """Whether a stored failure reason is one of these (the store keeps the text only)."""
        return (reason or "").endswith(cls.RESUME)


class NotHere(UserError):
    """One variant may not go to a place (its kernel panicked under flagbench's own qemu boot,
    and a panic on a real machine takes it down): that variant's cells there fail, the place
    and the other variants go on."""


_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_a_file(path) -> str | None:
    """None when path is a regular file (or a symlink to one), else what is wrong, to follow
    its name: "does not exist", "is a FIFO, not a file", ...

    >>> not_a_file("/dev/null"), not_a_file("/no/such/file")
    ('is a character device, not a file', 'does not exist')
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "does not exist"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISREG(mode):
        return None
    what = next((name for test, name in _NOT_REGULAR if test(mode)), "not a regular file")
    return f"is {what}, not a file"


def disk_full(output: str) -> bool:
    """Whether a tool's messages say it could not write because a disk (or quota) is full."""
    return "No space left on device" in output or "Disk quota exceeded" in output
