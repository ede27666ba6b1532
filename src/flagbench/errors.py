"""The one exception type the CLI turns into a single stderr line and exit 2."""


class UserError(Exception):
    """Bad input: a missing file, a broken experiment, an unknown target.

    The message is printed as one line, without a traceback; exit status 2.
    """
