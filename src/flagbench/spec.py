"""The experiment file: which sources, built which ways (variants), for which
targets and compilers, and which benchmarks to run on the builds.

`load(path)` reads and checks it; every mistake is a UserError "FILE:LINE: what is
wrong". Unknown keys are errors, so a typo never silently does nothing. The
reference, with examples, is docs/experiments.md.
"""
from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from flagbench import benchspec, kernelspec, refspec, vcs
from flagbench.benchspec import Bench
from flagbench.errors import UserError, not_a_file
from flagbench.targets import TARGETS, Target, get_target

FILE_NAME = "experiment.toml"
SOURCE_SUFFIXES = (".c", ".S", ".s")
DEFAULT_CFLAGS = ("-O2",)
DEFAULT_TARGETS = ("x86_64",)
TOP_KEYS = {"name", "description", "sources", "targets", "compilers", "cflags",
            "variants", "target", "bench", "show", "kernel", "cache", "hosts", "build", "places",
            "layout_check", "check"}
CHECK_KEYS = ("size", "counts", "time")   # [check] budgets: how much each may grow (mail/check.py)
VARIANT_KEYS = {"cflags", "optional_cflags", "defines", "sources", "ref"}
TARGET_KEYS = {"cflags", "optional_cflags"}
KERNEL_VARIANT_KEYS = {"kcflags", "fragments", "make", "patches"}   # with a [kernel] table (kernelspec.py)
_BAD_NAME = re.compile(r"[/:\s]|^\.")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
C_FILE_KEYS = ("cflags", "optional_cflags", "defines")   # of the C sources: nothing in a kernel build
_COMPILER = re.compile(r"[A-Za-z0-9._+/-]+")
_LOCAL_INCLUDE = re.compile(rb'^\s*#\s*include\s+"([^"]+)"', re.M)


@dataclass(frozen=True)
class Variant:
    name: str
    cflags: tuple[str, ...] = ()
    optional_cflags: tuple[str, ...] = ()        # dropped, with a note, where rejected
    defines: tuple[tuple[str, str], ...] = ()    # ("NAME", "1") -> -DNAME=1
    sources: tuple[Path, ...] | None = None     # None: the experiment's sources
    ref: str | None = None                       # a git revision: the sources (or kernel tree) at it
    commit: "vcs.Commit | None" = None           # ... resolved once, at load (sha, tree, subject)

    def define_flags(self) -> list[str]:
        return [f"-D{k}={v}" for k, v in self.defines]


def compiler_label(compiler: str) -> str:
    """A compiler as cell keys, paths and tables name it: a driver given by path by its file name.

    >>> compiler_label("/usr/bin/gcc-12"), compiler_label("clang")
    ('gcc-12', 'clang')
    """
    return compiler.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Cell:
    variant: Variant
    target: str
    compiler: str

    @property
    def key(self) -> str:
        return f"{self.variant.name}/{self.target}/{self.compiler}"

    @property
    def arch(self) -> Target:
        """The Target of `target`: every per-architecture fact (compilers, Kbuild, boot, ...)."""
        return get_target(self.target)


@dataclass(frozen=True)
class Experiment:
    name: str
    path: Path                                   # the .toml file
    root: Path                                   # its directory: sources are relative to it
    description: str
    sources: tuple[Path, ...]
    cflags: tuple[str, ...]
    variants: tuple[Variant, ...]                # the first is the baseline
    targets: tuple[str, ...]
    compilers: tuple[str, ...] | None            # None: each target's default compiler
    target_cflags: dict[str, tuple[str, ...]]
    benches: tuple[Bench, ...]                   # typed, one dataclass per kind (benchspec.py)
    hash: str                                    # sha256 of the file, its sources and their local headers
    target_optional_cflags: dict[str, tuple[str, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()                  # cells skipped, and why
    show: tuple[str, ...] = ()                   # functions reports show side by side (asm)
    kernel: "kernelspec.Kernel | None" = None   # the [kernel] table; None for C-only experiments
    cache_remote: str | None = None              # [cache] remote: ccache remote storage (ccache.py)
    hosts: tuple[str, ...] = ()                  # ssh destinations that time the benches (run --host)
    distcc: tuple[str, ...] = ()                 # [build] distcc: hosts compiles are sent to (distcc.py)
    places: tuple[str, ...] = ()                 # labgrid places that time them (run --place; hosts/labgrid.py)
    layout_check: bool = False                   # measure again with every function 64-byte aligned (run/layout.py)
    check: tuple[tuple[str, float], ...] = ()    # [check] budgets, ("size", 1.0) for size = "+1%"

    def cells(self) -> list[Cell]:
        """variants x targets x compilers, without the pairs a compiler cannot build."""
        return [Cell(v, t, c) for v in self.variants for t, c in self.pairs()[0]]

    def pairs(self) -> tuple[list[tuple[str, str]], list[str]]:
        """The (target, compiler) pairs that can be built, and a note per skipped pair."""
        pairs, notes = [], []
        for t in self.targets:
            target = TARGETS[t]
            for c in self.compilers or (target.default_compiler,):
                problem = target.compiler_problem(c)
                if problem:
                    notes.append(f"skipped {t}/{c}: {problem}")
                else:
                    pairs.append((t, c))
        return pairs, notes

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise UserError(f"{self.path}: no variant {name!r} (variants: {', '.join(v.name for v in self.variants)})")


def load(path: str | Path) -> Experiment:
    """An experiment from a directory (its experiment.toml) or a .toml file."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    problem = not_a_file(path)
    if problem == "does not exist":
        raise UserError(f"{path}: no such experiment file")
    if problem:
        raise UserError(f"{path}: {problem}")
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(_toml_error(path, e)) from None
    return _Checker(path, text).experiment(data)


def _toml_error(path: Path, e: tomllib.TOMLDecodeError) -> str:
    """tomllib says "... (at line 3, column 5)": put the place first, like a compiler."""
    msg = str(e)
    m = re.search(r"\s*\(at line (\d+), column (\d+)\)$", msg)
    if m:
        return f"{path}:{m.group(1)}:{m.group(2)}: {msg[:m.start()]}"
    m = re.search(r"\s*\(at end of document\)$", msg)
    if m:
        return f"{path}:{text_lines(path)}: {msg[:m.start()]} (at end of file)"
    return f"{path}: {msg}"


def text_lines(path: Path) -> int:
    return max(1, len(path.read_text(encoding="utf-8", errors="replace").splitlines()))


class _Checker:
    """Turns the parsed TOML into an Experiment, or a UserError with the line of the
    offending key."""

    def __init__(self, path: Path, text: str):
        self.path, self.text = path, text
        self.root = path.resolve().parent
        self.key_lines = _key_lines(text)

    def fail(self, where: tuple, what: str):
        raise UserError(f"{self.path}:{self.line_of(where)}: {what}")

    def line_of(self, where: tuple) -> int:
        """The line of the key path that shares the longest prefix with `where`."""
        best, best_line = -1, 1
        for keys, line in self.key_lines:
            n = 0
            while n < min(len(keys), len(where)) and keys[n] == where[n]:
                n += 1
            if n > best and n > 0:
                best, best_line = n, line
        return best_line

    # -- typed getters --------------------------------------------------------------
    def strings(self, table: dict, key: str, where: tuple, default=None) -> tuple[str, ...] | None:
        value = table.get(key, default)
        if value is default:
            return default
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            self.fail(where + (key,), f"{key} must be a list of strings, like {key} = [\"{_example(key)}\"]")
        return tuple(value)

    def string(self, table: dict, key: str, where: tuple, default: str) -> str:
        value = table.get(key, default)
        if not isinstance(value, str):
            self.fail(where + (key,), f"{key} must be a string")
        return value

    def table(self, value, where: tuple, what: str) -> dict:
        if not isinstance(value, dict):
            self.fail(where, f"{what} must be a table")
        return value

    def no_repeats(self, names, where: tuple, what: str) -> None:
        seen = set()
        for n in names:
            if n in seen:
                self.fail(where, f"{what} names {n} twice")
            seen.add(n)

    def known_keys(self, table: dict, allowed: set, where: tuple, what: str):
        for key in table:
            if key not in allowed:
                self.fail(where + (key,), f"unknown key {key!r} in {what} (known: {', '.join(sorted(allowed))})")

    def source_paths(self, names: tuple[str, ...], where: tuple) -> tuple[Path, ...]:
        if not names:
            self.fail(where, "sources is empty: name at least one .c or .S file")
        paths, stems = [], {}
        for name in names:
            p = (self.root / name).resolve()
            if p.suffix not in SOURCE_SUFFIXES:
                self.fail(where, f"source {name}: not a C or assembly file ({', '.join(SOURCE_SUFFIXES)})")
            problem = not_a_file(p)
            if problem:
                self.fail(where, f"source {name} {problem}"
                          + (f" (looked in {self.root})" if problem == "does not exist" else ""))
            if p.stem in stems:
                self.fail(where, f"sources {stems[p.stem]} and {name} would both make {p.stem}.o")
            stems[p.stem] = name
            paths.append(p)
        return tuple(paths)

    # -- the file -------------------------------------------------------------------
    def experiment(self, data: dict) -> Experiment:
        self.known_keys(data, TOP_KEYS, (), "the experiment")
        default_name = self.path.parent.resolve().name if self.path.name == FILE_NAME else self.path.stem
        name = self.string(data, "name", (), default_name)
        if "sources" not in data and "kernel" not in data and not data.get("bench"):
            self.fail(("sources",), "missing sources = [\"file.c\", ...]")
        sources = self.source_paths(self.strings(data, "sources", ()), ("sources",)) if "sources" in data else ()
        targets = self.strings(data, "targets", (), DEFAULT_TARGETS)
        if not targets:
            self.fail(("targets",), "targets is empty")
        for t in targets:
            if t not in TARGETS:
                self.fail(("targets",), f"unknown target {t!r} (known: {', '.join(TARGETS)})")
        self.no_repeats(targets, ("targets",), "targets")
        compilers = self.strings(data, "compilers", (), None)
        if compilers is not None and (not compilers or not all(compilers)):
            self.fail(("compilers",), "compilers must name at least one compiler (gcc, clang, or a driver like gcc-12)")
        for c in compilers or ():
            if not _COMPILER.fullmatch(c):
                self.fail(("compilers",), f"compiler {c!r}: a driver name or path (letters, digits, '._+-/')")
        self.no_repeats([compiler_label(c) for c in compilers or ()], ("compilers",), "compilers")
        cflags = self.strings(data, "cflags", (), DEFAULT_CFLAGS)
        target_cflags, target_optional = self.target_tables(data.get("target", {}))
        variants = self.variants(data)
        benches = benchspec.parse(self, data.get("bench", []), root=self.root, targets=targets,
                                  variants=[v.name for v in variants], known_targets=tuple(TARGETS))
        if not sources and any(v.sources is None for v in variants):
            self.nothing_built(benches)
        if "kernel" in data and not sources and "cflags" in data and all(v.sources is None for v in variants):
            self.fail(("cflags",), "cflags are for C sources, and this experiment has none: did you mean "
                      "kcflags? (in [kernel], for every variant)")
        exp = Experiment(
            name=name, path=self.path, root=self.root,
            description=self.string(data, "description", (), ""),
            sources=sources, cflags=cflags, variants=variants, targets=targets,
            compilers=compilers, target_cflags=target_cflags, benches=benches,
            hash=experiment_hash(self.text, [sources, *(v.sources or () for v in variants)]),
            target_optional_cflags=target_optional, show=self.strings(data, "show", (), ()),
            cache_remote=self.cache_remote(data.get("cache", {})),
            hosts=self.hosts(data), distcc=self.build_table(data.get("build", {})), places=self.places(data),
            layout_check=self.flag(data, "layout_check", ()),
            check=self.budgets(data.get("check", {})))
        kernel = kernelspec.parse(self, data) if "kernel" in data else None   # the table, its variants' keys
        if kernel is not None:
            exp = replace(exp, kernel=kernel, hash=hashlib.sha256((exp.hash + kernel.hash).encode()).hexdigest())
        if any(v.ref is not None for v in exp.variants):   # refspec.py resolves them, once
            exp = refspec.resolve(self, exp, kernel)
        pairs, notes = exp.pairs()
        if not pairs:
            self.fail(("compilers",), "no compiler here can build any target: " + "; ".join(notes))
        return replace(exp, notes=tuple(notes))

    def budgets(self, table) -> tuple[tuple[str, float], ...]:
        """[check] size = "+1%", counts = "+2%", time = "+3%": how much each may grow."""
        table = self.table(table, ("check",), "[check]")
        self.known_keys(table, set(CHECK_KEYS), ("check",), "[check]")
        out = []
        for key in CHECK_KEYS:
            if key in table:
                value = table[key]
                m = re.fullmatch(r"\+?(\d+(?:\.\d+)?)%", value.strip()) if isinstance(value, str) else None
                if m is None:
                    self.fail(("check", key), f"[check] {key} = {value!r}: a growth budget like \"+1%\"")
                out.append((key, float(m.group(1))))
        return tuple(out)

    def nothing_built(self, benches) -> None:
        """Without sources a variant builds no objects: a bench that calls the experiment's
        functions, or a command given the objects' directory, has nothing to use."""
        for i, b in enumerate(benches):
            where = ("bench", i)
            calls = [b.function] if b.kind == "micro" else [f for f in getattr(b, "functions", ()) if f != "libc"]
            if calls:
                self.fail(where, f"bench {b.name!r} calls {calls[0]}: name the sources that define it "
                          f"(sources = [\"file.c\"])")
            if b.kind == "command" and not b.guest and any("{dir}" in a for a in b.command):
                self.fail(where, f"bench {b.name!r} uses {{dir}}, the objects of the build: name the sources "
                          f"(sources = [\"file.c\"])")

    def flag(self, table: dict, key: str, where: tuple) -> bool:
        value = table.get(key, False)
        if not isinstance(value, bool):
            self.fail(where + (key,), f"{key} must be true or false")
        return value

    def hosts(self, data: dict) -> tuple[str, ...]:
        hosts = self.strings(data, "hosts", (), ())
        from flagbench.hosts.checks import destination_problem
        for h in hosts:
            problem = destination_problem(h)
            if problem:
                self.fail(("hosts",), f"host {h!r}: {problem}")
        self.no_repeats(hosts, ("hosts",), "hosts")
        return hosts

    def places(self, data: dict) -> tuple[str, ...]:
        places = self.strings(data, "places", (), ())
        for p in places:
            if not p or p.startswith("-") or any(c.isspace() for c in p):
                self.fail(("places",), f"place {p!r}: a labgrid place name, or TAG=VALUE for any place so tagged")
        self.no_repeats([p for p in places if "=" not in p], ("places",), "places")   # a tag twice: two places
        return places

    def variants(self, data: dict) -> tuple[Variant, ...]:
        if "variants" not in data:
            self.fail(("variants",), "missing [variants], e.g. default = {} and strict = { cflags = [\"-mstrict-align\"] }")
        table = self.table(data["variants"], ("variants",), "variants")
        if not table:
            self.fail(("variants",), "[variants] is empty: name at least one")
        out = []
        for name, body in table.items():
            where = ("variants", name)
            if not name.strip():
                self.fail(where, "a variant has no name")
            if _BAD_NAME.search(name):
                self.fail(where, f"variant name {name!r}: no '/', ':', spaces or leading '.'")
            body = self.table(body, where, f"variant {name!r}")
            self.known_keys(body, VARIANT_KEYS | (KERNEL_VARIANT_KEYS if "kernel" in data else set()),
                            where, f"variant {name!r}")
            sources = self.strings(body, "sources", where, None)
            if "kernel" in data and "sources" not in data and sources is None:
                self.no_c_keys(body, name, where)
            out.append(Variant(
                name=name,
                cflags=self.strings(body, "cflags", where, ()),
                optional_cflags=self.strings(body, "optional_cflags", where, ()),
                defines=self.defines(body.get("defines", {}), where + ("defines",)),
                sources=None if sources is None else self.source_paths(sources, where + ("sources",)),
                ref=self.ref(body, where)))
        return tuple(out)

    def ref(self, body: dict, where: tuple) -> str | None:
        if "ref" not in body:
            return None
        ref = body["ref"]
        if not isinstance(ref, str) or not ref.strip():
            self.fail(where + ("ref",), "ref must be a git revision, like ref = \"v6.1\" or \"HEAD~2\"")
        return ref.strip()

    def no_c_keys(self, body: dict, name: str, where: tuple) -> None:
        """A kernel experiment's variant that builds no C sources: their keys would change nothing."""
        for key in C_FILE_KEYS:
            if key in body:
                hint = "did you mean kcflags?" if key != "defines" else "for the kernel: kcflags = [\"-DNAME=1\"]"
                self.fail(where + (key,), f"variant {name!r}: {key} are for C sources, and this experiment has "
                          f"none: {hint}")

    def defines(self, table, where: tuple) -> tuple[tuple[str, str], ...]:
        table = self.table(table, where, "defines")
        out = []
        for key, value in table.items():
            if not _C_IDENTIFIER.fullmatch(key):
                self.fail(where + (key,), f"define {key!r}: not a C identifier (letters, digits and '_', "
                          f"not starting with a digit)")
            if isinstance(value, bool):
                if not value:
                    self.fail(where + (key,), f"define {key} = false: leave it out instead")
                value = 1
            if not isinstance(value, (int, str)):
                self.fail(where + (key,), f"define {key} must be a number or a string")
            if isinstance(value, str) and ("\n" in value or "\r" in value):
                self.fail(where + (key,), f"define {key}: a value on one line")
            out.append((key, str(value)))
        return tuple(out)

    def cache_remote(self, table) -> str | None:
        """[cache] remote = "redis://host:port": where every compile shares its ccache objects."""
        from flagbench.ccache import check_remote

        table = self.table(table, ("cache",), "[cache]")
        self.known_keys(table, {"remote"}, ("cache",), "[cache]")
        if "remote" not in table:
            return None
        url = self.string(table, "remote", ("cache",), "")
        problem = check_remote(url)
        if problem:
            self.fail(("cache", "remote"), problem)
        return url

    def build_table(self, table) -> tuple[str, ...]:
        """[build] distcc = ["host/4", ...]: where compiles are sent (distcc.py)."""
        from flagbench.distcc import check_host

        table = self.table(table, ("build",), "[build]")
        self.known_keys(table, {"distcc"}, ("build",), "[build]")
        hosts = self.strings(table, "distcc", ("build",), ())
        for h in hosts:
            problem = check_host(h)
            if problem:
                self.fail(("build", "distcc"), problem)
        self.no_repeats(hosts, ("build", "distcc"), "[build] distcc")
        return hosts

    def target_tables(self, table) -> tuple[dict, dict]:
        table = self.table(table, ("target",), "[target]")
        flags, optional = {}, {}
        for name, body in table.items():
            where = ("target", name)
            if name not in TARGETS:
                self.fail(where, f"unknown target {name!r} in [target.{name}] (known: {', '.join(TARGETS)})")
            body = self.table(body, where, f"[target.{name}]")
            self.known_keys(body, TARGET_KEYS, where, f"[target.{name}]")
            flags[name] = self.strings(body, "cflags", where, ())
            optional[name] = self.strings(body, "optional_cflags", where, ())
        return flags, optional


def _example(key: str) -> str:
    return {"sources": "file.c", "targets": "x86_64", "compilers": "gcc", "distcc": "host/4"}.get(key, "-O2")


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r'^\s*((?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\'))*)\s*=')
_INLINE_KEY = re.compile(r'[{,]\s*([A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\')\s*=')


def _split_key(dotted: str) -> tuple[str, ...]:
    parts = re.findall(r'[A-Za-z0-9_-]+|"[^"]*"|\'[^\']*\'', dotted)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


def _key_lines(text: str) -> list[tuple[tuple, int]]:
    """Every key in the file with its line: ((table..., key...), lineno). Arrays of
    tables count their elements, so the third [[bench]] is ("bench", 2). Inline
    tables add their keys one level down. Good enough to point at a line."""
    out, table, counts = [], (), {}
    for lineno, line in enumerate(text.splitlines(), 1):
        h = _HEADER.match(line)
        if h and not _KEY.match(line):
            keys = _split_key(h.group(2))
            if h.group(1) == "[[":
                counts[keys] = counts.get(keys, -1) + 1
                table = keys + (counts[keys],)
            else:
                table = keys
            out.append((table, lineno))
            continue
        k = _KEY.match(line)
        if k:
            path = table + _split_key(k.group(1))
            out.append((path, lineno))
            for inner in _INLINE_KEY.findall(line[k.end():]):
                out.append((path + _split_key(inner), lineno))
    return out


def local_headers(source: Path, seen: set[Path] | None = None) -> list[Path]:
    """The `#include "..."` files next to a source, recursively (for the hash)."""
    seen = set() if seen is None else seen
    out = []
    try:
        data = source.read_bytes()
    except OSError:
        return out
    for name in _LOCAL_INCLUDE.findall(data):
        header = (source.parent / name.decode(errors="replace")).resolve()
        if header not in seen and header.is_file():
            seen.add(header)
            out.append(header)
            out += local_headers(header, seen)
    return out


def files_digest(h, sources) -> None:
    """Feed every source and its local headers, by name and bytes, into hash h."""
    for src in sources:
        for f in (src, *local_headers(src)):
            h.update(str(f.name).encode() + b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")


def experiment_hash(text: str, source_lists) -> str:
    h = hashlib.sha256(text.encode())
    for sources in source_lists:
        files_digest(h, sources)
    return h.hexdigest()
