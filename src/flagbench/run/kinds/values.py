"""What a harness can print, checked before a value is used or stored.

flagbench's harnesses (src/flagbench/harness/*.c) print only unsigned 64-bit integers on
their "key value" lines (fb_print: decimal digits, at most 20 of them). Whatever came back
otherwise (over an ssh connection, from a wrapper, a broken host) is garbage, not data:
`ns -5`, `ns 1e308`, a 41-digit count, or an `iters 0` that would be divided by. Each bench
kind names the keys it reads and, where the harness promises more, their range (a timed
call takes at least a nanosecond and no longer than the bench's timeout; calibration never
asks for more than FB_MAX_ITERS iterations).

>>> garbage("iters 1000\\nns 20000000\\n", {"iters": (1, 2**40), "ns": (1, 300e9)})
>>> garbage("iters 0\\nns 5\\n", {"iters": (1, 2**40)})
"garbage output: 'iters 0' (iters is 1..1099511627776)"
>>> garbage("ns 1e308\\n", {"ns": (1, 300e9)})
"garbage output: 'ns 1e308' (ns is an unsigned integer)"
"""
from __future__ import annotations

import re

UINT64_MAX = 2**64 - 1
MAX_ITERS = 2**40            # micro.c's FB_MAX_ITERS
_UINT = re.compile(r"[0-9]{1,20}")


def printed(stdout: str, key: str) -> str | None:
    """The text of KEY's last "key value" line in STDOUT (None: no such line)."""
    found = None
    for line in stdout.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == key:
            found = words[1]
    return found


def garbage(stdout: str, ranges: dict[str, tuple[float, float]]) -> str | None:
    """Why the values of RANGES' keys in STDOUT are not what the harness prints, or None.
    A key absent from STDOUT is not checked here (the executor's own metrics, `insns`)."""
    for key, (lo, hi) in ranges.items():
        text = printed(stdout, key)
        if text is None:
            continue
        if not _UINT.fullmatch(text) or int(text) > UINT64_MAX:
            return f"garbage output: {f'{key} {text}'[:80]!r} ({key} is an unsigned integer)"
        if not lo <= int(text) <= hi:
            return f"garbage output: {f'{key} {text}'[:80]!r} ({key} is {lo:.0f}..{hi:.0f})"
    return None


def uints(stdout: str, keys) -> str | None:
    """Every KEY printed is an unsigned 64-bit integer (no tighter range known)."""
    return garbage(stdout, {k: (0, UINT64_MAX) for k in keys})


def perf_garbage(metrics: dict[str, float]) -> str | None:
    """A host's perf counts (perf_*) are counts: whole, not negative, at most 2**64."""
    for name, value in metrics.items():
        if name.startswith("perf_") and not (0 <= value <= UINT64_MAX and value == int(value)):
            return f"garbage output: perf count {name} = {value!r}"
    return None
