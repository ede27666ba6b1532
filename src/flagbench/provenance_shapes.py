"""The types of the provenance fields flagbench's readers use (report, resume, `until`), so
that a hand-edited store (`contention = "x"`, `hosts = 5`) is one line naming the row, not a
traceback where the field is first used.

>>> mismatch({"contention": "x"}, SAMPLE)
'provenance contention "x" is not a table of numbers'
>>> mismatch({"hosts": {"box": {"machine": "x86_64"}}, "seed": 7}, RUN) is None
True
"""
from __future__ import annotations

import json
import math


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _numbers(x) -> bool:
    return x is None or (isinstance(x, list) and all(_number(v) for v in x))


def _strings(x) -> bool:
    return isinstance(x, list) and all(isinstance(v, str) for v in x)


# provenance fields the readers use (report, resume, until), and what each must be: (test, in words)
RUN = {
    "hosts": (lambda x: isinstance(x, dict) and all(isinstance(h, dict) for h in x.values()),
              "a table of hosts"),
    "variants": (_strings, "a list of names"),
    "notes": (_strings, "a list of lines"),
    "cpu_features": (_strings, "a list of names"),
    "loadavg": (_numbers, "a list of numbers"),
}
SAMPLE = {
    "contention": (lambda x: x is None or (isinstance(x, dict) and all(v is None or _number(v) for v in x.values())),
                   "a table of numbers"),
    "sample": (lambda x: x is None or (isinstance(x, int) and not isinstance(x, bool)), "a sample number"),
    "job": (lambda x: isinstance(x, str), "a job name"),
    "round": (lambda x: x is None or isinstance(x, (str, int)) and not isinstance(x, bool), "a round"),
    "host_load": (_numbers, "a list of numbers"),
    "loadavg": (_numbers, "a list of numbers"),
}


def mismatch(prov: dict, shape: dict) -> str | None:
    """The first field of PROV that SHAPE says is of the wrong type, in words, or None."""
    for key, (ok, what) in shape.items():
        if key in prov and not ok(prov[key]):
            return f"provenance {key} {json.dumps(prov[key])[:40]} is not {what}"
    return None
