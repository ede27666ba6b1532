"""The `[kernel]` table of an experiment and the kernel keys of its variants.

    [kernel]
    source = "debian:6.1"            # or "debian:6.12", or a path to a kernel tree
    config = "tinyconfig"            # defconfig, allnoconfig, any *_defconfig, a .config path,
                                     # or "host" / "host:DEST": the config a machine's kernel runs with
    fragments = ["CONFIG_X=y", "extra.config"]   # config lines, or fragment files
    kcflags = ["-g0"]                # every variant
    make = { V = "0" }               # make variables for every variant
    patches = ["fix.patch"]          # applied to every variant (on a copy)
    fuzz = 0                         # context lines a hunk may ignore to apply (patch --fuzz);
                                     # default 0: a hunk that needs fuzz is refused, named

    [variants]
    default = {}
    aligned = { kcflags = ["-falign-functions=64"] }

A variant's kcflags, fragments, make and patches add to (and for make variables and options
override) the table's. `spec.load` calls `parse` with its checker, so mistakes read
"FILE:LINE: what is wrong" like every other experiment error.
"""
from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from flagbench.errors import UserError, not_a_file

TABLE_KEYS = {"source", "config", "fragments", "kcflags", "make", "patches", "fuzz"}
MAX_FUZZ = 3   # patch(1)'s context is 3 lines: more fuzz than that ignores all of it
DEBIAN_SOURCES = {"debian:6.1": Path("/usr/src/linux-source-6.1.tar.xz"),
                  "debian:6.12": Path("/usr/src/linux-source-6.12.tar.xz")}
DEFAULT_SOURCE = "debian:6.1"
DEFAULT_CONFIG = "tinyconfig"
BASE_TARGETS = ("tinyconfig", "defconfig", "allnoconfig", "allmodconfig", "allyesconfig")
_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")
_MAKE_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")   # CFLAGS_string.o is a Kbuild name too
# Set by flagbench itself: a variant changing them would build a different tree or lie.
_RESERVED_MAKE = {"O", "ARCH", "KCFLAGS", "SRCARCH", "KBUILD_OUTPUT"}
# Make variables that name a program (CC = "ccache gcc-12": the last word): text, and installed.
_PROGRAM_MAKE = {"CC", "HOSTCC", "HOSTCXX", "LD", "HOSTLD", "AR", "NM", "OBJCOPY", "OBJDUMP", "READELF",
                 "STRIP", "AS", "CPP"}


@dataclass(frozen=True)
class Option:
    """One config assignment asked for, as `.config` spells it ("n" for "is not set")."""
    name: str        # CONFIG_FOO
    value: str       # y, m, n, a number, or a quoted string
    origin: str      # where it was asked: "experiment.toml:7" or "boot.config:3"

    @property
    def line(self) -> str:
        return f"# {self.name} is not set" if self.value == "n" else f"{self.name}={self.value}"


@dataclass(frozen=True)
class Changes:
    """What the [kernel] table, or one variant, asks of a build."""
    kcflags: tuple[str, ...] = ()
    options: tuple[Option, ...] = ()
    make: tuple[tuple[str, str], ...] = ()
    patches: tuple[Path, ...] = ()

    def plus(self, other: "Changes") -> "Changes":
        """self, then other: lists concatenate, a make variable of other wins."""
        make = dict(self.make)
        make.update(other.make)
        return Changes(self.kcflags + other.kcflags, self.options + other.options,
                       tuple(make.items()), self.patches + other.patches)


@dataclass(frozen=True)
class Kernel:
    source: str                               # "debian:6.1", "debian:6.12" or an absolute path
    config: str                               # a make target (tinyconfig, *_defconfig) or an absolute path
    common: Changes                           # the [kernel] table's own keys: every variant
    variants: tuple[tuple[str, Changes], ...]  # each variant's own keys
    hash: str                                 # sha256 of the fragment files, patches and a .config base
    fuzz: int = 0                             # patch --fuzz allowed (0: a fuzzed hunk is refused)

    @property
    def config_is_file(self) -> bool:
        return self.config.startswith("/")

    def changes(self, variant: str) -> Changes:
        """Everything variant asks for: the table's keys, then its own."""
        own = dict(self.variants).get(variant, Changes())
        return self.common.plus(own)


def is_host_config(config: str) -> bool:
    """config = "host" (the --host machine's) or "host:DEST": the running kernel's config there."""
    return config == "host" or config.startswith("host:")


def parse_lines(lines, origin_of) -> tuple[Option, ...]:
    """Config lines -> Options; blank lines and comments (other than "is not set") are skipped.
    origin_of(i) names line i for errors and reports. A malformed line is a UserError."""
    out = []
    for i, raw in enumerate(lines):
        line = raw.strip()
        if not line:
            continue
        m = _SET.match(line)
        if m:
            value = m.group(2).strip()
            out.append(Option(m.group(1), "n" if value == "n" else value, origin_of(i)))
            continue
        m = _UNSET.match(line)
        if m:
            out.append(Option(m.group(1), "n", origin_of(i)))
            continue
        if line.startswith("#"):
            continue
        raise UserError(f"{origin_of(i)}: {line!r} is not a config line "
                        "(CONFIG_FOO=y, CONFIG_FOO=\"text\" or # CONFIG_FOO is not set)")
    return tuple(out)


def read_config(path: Path) -> dict[str, str]:
    """CONFIG_FOO -> value as .config writes it; "is not set" lines read as "n"."""
    text = path.read_text(errors="replace").splitlines()
    return {o.name: o.value for o in parse_lines(text, lambda i: f"{path}:{i + 1}")}


def config_delta(old: Path, new: Path) -> list[tuple[str, str, str]]:
    """(option, old value, new value) for every option that differs between two .config files
    ("n" for not set), sorted by option."""
    a, b = read_config(old), read_config(new)
    return [(k, a.get(k, "n"), b.get(k, "n")) for k in sorted(set(a) | set(b)) if a.get(k, "n") != b.get(k, "n")]


def fragment_file(path: Path) -> tuple[Option, ...]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise UserError(f"{path}: cannot read the config fragment: {e.strerror}") from None
    return parse_lines(lines, lambda i: f"{path}:{i + 1}")


def is_config_line(text: str) -> bool:
    return bool(_SET.match(text.strip()) or _UNSET.match(text.strip()))


def parse(checker, data: dict) -> Kernel:
    """The [kernel] table and the kernel keys of [variants], checked with spec's checker."""
    table = checker.table(data["kernel"], ("kernel",), "[kernel]")
    checker.known_keys(table, TABLE_KEYS, ("kernel",), "[kernel]")
    digest = hashlib.sha256()
    source = checker.string(table, "source", ("kernel",), DEFAULT_SOURCE)
    if source.startswith("debian:"):
        if source not in DEBIAN_SOURCES:
            checker.fail(("kernel", "source"), f"unknown source {source!r} "
                         f"(known: {', '.join(DEBIAN_SOURCES)}, or a path to a kernel tree)")
    else:
        tree = (checker.root / source).resolve()
        if not (tree / "Makefile").is_file() or not (tree / "Kconfig").is_file():
            checker.fail(("kernel", "source"), f"source {source!r}: {tree} is not a kernel tree "
                         "(no Makefile and Kconfig)")
        source = str(tree)
    config = checker.string(table, "config", ("kernel",), DEFAULT_CONFIG)
    if config == "host:" or (config.startswith("host:") and config[5:6] == "-"):
        checker.fail(("kernel", "config"), f"config {config!r}: host:DEST names an ssh destination")
    if config not in BASE_TARGETS and not config.endswith("_defconfig") and not is_host_config(config):
        path = (checker.root / config).resolve()
        if not path.is_file():
            checker.fail(("kernel", "config"), f"config {config!r}: not one of {', '.join(BASE_TARGETS)}, "
                         f"a *_defconfig, or an existing .config file (looked for {path})")
        digest.update(path.read_bytes())
        config = str(path)
    common = _changes(checker, table, ("kernel",), digest)
    variants = []
    for name, body in data.get("variants", {}).items():
        if isinstance(body, dict):
            variants.append((name, _changes(checker, body, ("variants", name), digest)))
    fuzz = table.get("fuzz", 0)
    if not isinstance(fuzz, int) or isinstance(fuzz, bool) or not 0 <= fuzz <= MAX_FUZZ:
        checker.fail(("kernel", "fuzz"), f"fuzz must be a whole number of context lines, 0 to {MAX_FUZZ} "
                     f"(patch --fuzz), not {fuzz!r}")
    return Kernel(source, config, common, tuple(variants), digest.hexdigest(), fuzz)


def _changes(checker, table: dict, where: tuple, digest) -> Changes:
    kcflags = checker.strings(table, "kcflags", where, ())
    options = []
    for i, item in enumerate(checker.strings(table, "fragments", where, ())):
        line = checker.line_of(where + ("fragments",))
        if is_config_line(item):
            options += parse_lines([item], lambda _, line=line: f"{checker.path}:{line}")
        elif item.strip().startswith("CONFIG_") or "=" in item:
            checker.fail(where + ("fragments",), f"fragment {item!r} is not a config line "
                         "(CONFIG_FOO=y, CONFIG_FOO=\"text\" or # CONFIG_FOO is not set) nor a file")
        else:
            path = (checker.root / item).resolve()
            problem = not_a_file(path)
            if problem:
                checker.fail(where + ("fragments",), f"fragment file {item} {problem} (looked in {checker.root})")
            digest.update(path.read_bytes())
            options += fragment_file(path)
    make = checker.table(table.get("make", {}), where + ("make",), "make")
    pairs = []
    for key, value in make.items():
        if not _MAKE_VAR.match(key):
            checker.fail(where + ("make", key), f"make variable {key!r} is not a name")
        if key in _RESERVED_MAKE:
            checker.fail(where + ("make", key), f"make variable {key} is set by flagbench "
                         f"({'use kcflags' if key == 'KCFLAGS' else 'from the target and cell'})")
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            checker.fail(where + ("make", key), f"make variable {key} must be a string or a number")
        if key in _PROGRAM_MAKE or key == "CROSS_COMPILE":
            _program(checker, where + ("make", key), key, value)
        pairs.append((key, str(value)))
    patches = []
    for item in checker.strings(table, "patches", where, ()):
        path = (checker.root / item).resolve()
        problem = not_a_file(path)
        if problem:
            checker.fail(where + ("patches",), f"patch {item} {problem} (looked in {checker.root})")
        digest.update(path.read_bytes())
        patches.append(path)
    return Changes(tuple(kcflags), tuple(options), tuple(pairs), tuple(patches))


def _program(checker, where: tuple, key: str, value) -> None:
    """A make variable that names a program (or, CROSS_COMPILE, a prefix of programs' names)."""
    if not isinstance(value, str) or not value.strip():
        checker.fail(where, f"make variable {key} names a program: a string, like {key} = \"gcc-12\" "
                     f"(not {value!r})")
    if key != "CROSS_COMPILE" and shutil.which(value.split()[-1]) is None:
        checker.fail(where, f"make variable {key}: {value.split()[-1]} is not installed")
