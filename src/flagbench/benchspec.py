"""The `[[bench]]` tables of an experiment file, typed: one frozen dataclass per kind.

Every key has its type, its range and its default here, in the dataclass field; spec.py
calls `parse` while it checks the rest of the file, so a mistake is `FILE:LINE: what`
and exit 2 before anything is built. The run stage (run/kinds/) only reads these.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from flagbench.errors import not_a_file

KIND_NAMES = ("micro", "memcpy", "memset", "memmove", "wis", "command")
MEMORY_KINDS = ("memcpy", "memset", "memmove")
MEASURES = ("time", "insns", "perf", "profile")   # perf: task-clock and page faults of each timed run;
# profile: per-symbol profiles (profile_experiment.py), taken by `flagbench profile` and `flagbench demo`, not by the engine
WIS_MODES = ("processes", "threads")
MAX_LAYOUTS = 256                      # distinct paddings of 16..4096 bytes (run/layout.py)
MAX_TASKS = 1024                       # the will-it-scale driver's limit
MAX_SIZE = 16 << 20
_C_NAME = re.compile(r"[A-Za-z_]\w*")


def _range(lo=None, hi=None, *, lo_open=False):
    return {"lo": lo, "hi": hi, "lo_open": lo_open}


@dataclass(frozen=True, kw_only=True)
class Bench:
    """What every kind has. `timeout` bounds one measurement (a sample, or the pair of
    counted runs) in seconds of wall time: on expiry everything it started is killed
    and the cell fails."""
    name: str
    kind: str
    line: int = 0                                        # where the table starts, for messages
    metrics: tuple[str, ...] = field(default=("time", "insns"), metadata={"choices": MEASURES})
    samples: int = field(default=10, metadata=_range(1, 100_000))
    warmup: int = field(default=1, metadata=_range(0, 1000))
    targets: tuple[str, ...] | None = None               # None: every target of the experiment
    timeout: float = field(default=300.0, metadata=_range(0, 86_400, lo_open=True))

    def runs_on(self, target: str) -> bool:
        return self.targets is None or target in self.targets

    @property
    def guest(self) -> bool:
        """Runs inside each variant's booted kernel: a field of the kinds that can (wis, command)."""
        return False


@dataclass(frozen=True, kw_only=True)
class MicroBench(Bench):
    """`uint64_t FUNCTION(uint64_t n)` called by harness/micro.c."""
    function: str
    count_iters: int = field(default=1000, metadata=_range(1, 10**9))   # counted with n and 2n
    layouts: int = field(default=0, metadata=_range(0, MAX_LAYOUTS))
    layout_variants: tuple[str, ...] | None = None       # None: the baseline
    # no `guest`: a guest /init runs whole programs (wis, command); a micro bench inside the
    # booted kernel is not built yet, so the key is refused at its line rather than ignored


@dataclass(frozen=True, kw_only=True)
class MemoryBench(Bench):
    """memcpy / memset / memmove implementations: memcheck, then a size x alignment sweep."""
    functions: tuple[str, ...]                           # "libc": the C library's own
    sizes: tuple[int, ...] = field(default=(32, 100, 4096, 1048576), metadata=_range(1, MAX_SIZE))
    alignments: tuple[tuple[int, int], ...] = ((0, 0), (3, 1))   # [dst, src] in 0..63


@dataclass(frozen=True, kw_only=True)
class WisBench(Bench):
    """A will-it-scale testcase; one sample is one whole run of `duration` seconds."""
    testcase: Path
    samples: int = field(default=1, metadata=_range(1, 10_000))
    warmup: int = field(default=0, metadata=_range(0, 0))
    tasks: tuple[int, ...] = field(default=(1,), metadata=_range(1, MAX_TASKS))
    modes: tuple[str, ...] = field(default=WIS_MODES, metadata={"choices": WIS_MODES})
    duration: float = field(default=5.0, metadata=_range(0, 3600, lo_open=True))  # host: whole 1 s samples
    warmup_seconds: float = field(default=2.0, metadata=_range(0, 3600))
    guest: bool = False


@dataclass(frozen=True, kw_only=True)
class CommandBench(Bench):
    """A whole command per variant, timed from outside; {dir} {cc} {cflags} {target}
    {variant} {root} are filled in."""
    command: tuple[str, ...]
    metrics: tuple[str, ...] = field(default=("time",), metadata={"choices": ("time", "perf")})
    guest: bool = False


BENCH_TYPES: dict[str, type[Bench]] = {"micro": MicroBench, "memcpy": MemoryBench, "memset": MemoryBench,
                                 "memmove": MemoryBench, "wis": WisBench, "command": CommandBench}


def keys_of(kind: str) -> list[str]:
    return [f.name for f in fields(BENCH_TYPES[kind]) if f.name != "line"]


def with_samples(bench: Bench, samples: int | None) -> Bench:
    """The bench with `--samples` applied."""
    return bench if samples is None else replace(bench, samples=samples)


def parse(check, items, *, root: Path, targets: tuple[str, ...], variants: list[str],
          known_targets) -> tuple[Bench, ...]:
    """The [[bench]] array as typed benches; `check` is spec's checker (fail, line_of)."""
    if not isinstance(items, list):
        check.fail(("bench",), "bench must be an array of tables: [[bench]]")
    out, seen = [], set()
    for i, table in enumerate(items):
        where = ("bench", i)
        if not isinstance(table, dict):
            check.fail(where, "[[bench]] must be a table")
        reader = _Reader(check, table, where)
        name = reader.name()
        if name in seen:
            check.fail(where + ("name",), f"two benches named {name!r}")
        seen.add(name)
        kind = table.get("kind")
        if kind is None:
            check.fail(where, f"bench {name!r} has no kind (one of {', '.join(KIND_NAMES)})")
        if not isinstance(kind, str) or kind not in BENCH_TYPES:
            check.fail(where + ("kind",), f"bench {name!r}: unknown kind {kind!r} (one of {', '.join(KIND_NAMES)})")
        allowed = set(keys_of(kind))
        for key in table:
            if key not in allowed:
                check.fail(where + (key,), f"bench {name!r}: unknown key {key!r} for kind {kind} "
                           f"(known: {', '.join(sorted(allowed))})")
        values = {"name": name, "kind": kind, "line": check.line_of(where)}
        for f in fields(BENCH_TYPES[kind]):
            if f.name in values or f.name not in table:
                continue
            values[f.name] = reader.value(f)
        bench = reader.complete(BENCH_TYPES[kind], values, root, targets, variants, known_targets)
        out.append(bench)
    return tuple(out)


class _Reader:
    """Typed values of one [[bench]] table; every mistake names the bench and the key."""

    def __init__(self, check, table: dict, where: tuple):
        self.check, self.table, self.where = check, table, where
        self.bench = "?"

    def fail(self, key: str | None, what: str):
        self.check.fail(self.where + ((key,) if key else ()), f"bench {self.bench!r}: {what}")

    def name(self) -> str:
        name = self.table.get("name")
        if name is None:
            self.check.fail(self.where, "[[bench]] without name")
        if not isinstance(name, str) or not name.strip() or re.search(r"[\s/:,=\x00-\x1f\x7f]", name):
            self.check.fail(self.where + ("name",), "a bench name is a non-empty string without spaces, "
                            "control characters, '/', ':', ',' or '='")
        self.bench = name
        return name

    def value(self, f):
        key, raw = f.name, self.table[f.name]
        typ = str(f.type)
        if "\0" in str(raw):   # no file name, command or function holds one (the OS refuses them)
            self.fail(key, f"{key} holds a NUL character")
        limits = f.metadata
        if typ == "bool":
            if not isinstance(raw, bool):
                self.fail(key, f"{key} must be true or false, not {raw!r}")
            return raw
        if typ == "int":
            return self.integer(key, raw, limits)
        if typ == "float":
            return self.number(key, raw, limits)
        if typ == "str":
            if not isinstance(raw, str) or not raw:
                self.fail(key, f"{key} must be a non-empty string")
            return raw
        if typ == "Path":
            if not isinstance(raw, str) or not raw:
                self.fail(key, f"{key} must be a file name, like {key} = \"file.c\"")
            return Path(raw)
        if key == "alignments":
            return self.alignments(raw)
        if typ.startswith("tuple[int"):
            items = self.array(key, raw)
            return tuple(self.integer(key, x, limits) for x in items)
        # tuples of strings; a command's arguments may repeat and be empty
        items = self.array(key, raw, unique=key != "command")
        if not all(isinstance(x, str) and (x or key == "command") for x in items):
            self.fail(key, f"{key} must be a list of non-empty strings, like {key} = [\"{_example(key)}\"]")
        choices = limits.get("choices")
        if choices:
            bad = [x for x in items if x not in choices]
            if bad:
                self.fail(key, f"{key}: {bad[0]!r} is not one of {', '.join(choices)}")
        return tuple(items)

    def array(self, key: str, raw, unique: bool = True) -> list:
        if not isinstance(raw, list) or not raw:
            self.fail(key, f"{key} must be a non-empty list")
        dups = sorted({str(x) for x in raw if raw.count(x) > 1}) if unique else []
        if dups:
            self.fail(key, f"{key} names {dups[0]} twice")
        return raw

    def integer(self, key: str, raw, limits) -> int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            if isinstance(raw, float) and raw.is_integer():
                raw = int(raw)
            else:
                self.fail(key, f"{key} must be a whole number, not {raw!r}")
        self.in_range(key, raw, limits)
        return raw

    def number(self, key: str, raw, limits) -> float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            self.fail(key, f"{key} must be a number of seconds, not {raw!r}")
        self.in_range(key, float(raw), limits)
        return float(raw)

    def in_range(self, key: str, value, limits) -> None:
        lo, hi, lo_open = limits.get("lo"), limits.get("hi"), limits.get("lo_open")
        if lo is not None and (value <= lo if lo_open else value < lo) or hi is not None and value > hi:
            if lo == hi:
                self.fail(key, f"{key} must be {lo} for this kind")
            low = f"more than {lo:g}" if lo_open else f"at least {lo:g}"
            self.fail(key, f"{key} = {value:g}: must be {low} and at most {hi:g}")

    def alignments(self, raw) -> tuple[tuple[int, int], ...]:
        items = self.array("alignments", raw)
        out = []
        for pair in items:
            if (not isinstance(pair, list) or len(pair) != 2
                    or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 63 for x in pair)):
                self.fail("alignments", f"alignments are [dst, src] pairs in 0..63, like [[0, 0], [3, 1]], "
                          f"not {pair!r}")
            out.append((pair[0], pair[1]))
        return tuple(out)

    def complete(self, cls, values: dict, root: Path, targets, variants, known_targets) -> Bench:
        """Required keys, and the checks that span keys or the rest of the file."""
        kind = values["kind"]
        required = {MicroBench: "function", MemoryBench: "functions", WisBench: "testcase",
                    CommandBench: "command"}[cls]
        if required not in values:
            example = {"function": 'function = "loop_fn"', "functions": 'functions = ["my_memcpy", "libc"]',
                       "testcase": 'testcase = "page_fault.c"', "command": 'command = ["make", "-C", "{dir}"]'}
            self.fail(None, f"kind {kind} needs {example[required]}")
        for key in ("function",):
            if key in values and not _C_NAME.fullmatch(values[key]):
                self.fail(key, f"{key} {values[key]!r} is not a C function name")
        if "functions" in values:
            bad = [f for f in values["functions"] if not _C_NAME.fullmatch(f)]
            if bad:
                self.fail("functions", f"functions: {bad[0]!r} is not a C function name (or \"libc\")")
        for t in values.get("targets") or ():
            if t not in known_targets:
                self.fail("targets", f"unknown target {t!r} (known: {', '.join(known_targets)})")
            if t not in targets:
                self.fail("targets", f"target {t!r} is not one of the experiment's targets ({', '.join(targets)})")
        if "layout_variants" in values:
            unknown = [v for v in values["layout_variants"] if v not in variants]
            if unknown:
                self.fail("layout_variants", f"layout_variants names no variant {unknown[0]!r} "
                          f"(variants: {', '.join(variants)})")
            if not values.get("layouts"):
                self.fail("layout_variants", "layout_variants without layouts = K does nothing")
        if cls is WisBench:
            values["testcase"] = path = (root / values["testcase"]).resolve()
            problem = not_a_file(path)
            if path.suffix != ".c" or problem == "does not exist":
                self.fail("testcase", f"testcase {path}: no such C file")
            if problem:
                self.fail("testcase", f"testcase {path} {problem}")
            for key, default in (("duration", 5.0), ("warmup_seconds", 2.0)):
                if not values.get("guest") and values.get(key, default) != round(values.get(key, default)):
                    self.fail(key, f"{key} is whole seconds on the host (one sample a second)")
            seconds = values.get("duration", 5.0) + values.get("warmup_seconds", 2.0)
            if values.get("timeout", 300.0) <= seconds:
                self.fail("timeout" if "timeout" in values else "duration",
                          f"timeout {values.get('timeout', 300.0):g} s is not more than duration + "
                          f"warmup_seconds ({seconds:g} s): set timeout")
        if cls is CommandBench and not values["command"][0].strip():
            self.fail("command", "command[0] must name a program")
        if cls is CommandBench and values.get("guest"):   # found now, not after the kernels are built
            program = values["command"][0]
            if not program.endswith(".c"):
                self.fail("command", "a guest command is [\"program.c\", \"arg\", ...]: the C file is built "
                          "statically into the guest (it has nothing else to run)")
            problem = not_a_file(root / program)
            if problem:
                self.fail("command", f"command[0] {program} {problem}"
                          + (f" (looked in {root})" if problem == "does not exist" else ""))
        return cls(**values)


def _example(key: str) -> str:
    return {"targets": "x86_64", "modes": "processes", "command": "make", "functions": "my_memcpy",
            "metrics": "time", "layout_variants": "default"}.get(key, "x")


class _Plain:
    """A checker for benches built in code (tests, other stages): messages without a line."""

    def fail(self, where, what):
        from flagbench.errors import UserError
        raise UserError(what)

    def line_of(self, where) -> int:
        return 0


def from_table(table: dict, *, root: Path = Path("."), targets: tuple[str, ...] | None = None,
               variants: tuple[str, ...] = ()) -> Bench:
    """One typed bench from a dict shaped like a [[bench]] table, checked the same way."""
    from flagbench.toolchains import TARGETS
    bench, = parse(_Plain(), [table], root=Path(root), targets=targets or tuple(TARGETS),
                   variants=list(variants), known_targets=tuple(TARGETS))
    return bench
