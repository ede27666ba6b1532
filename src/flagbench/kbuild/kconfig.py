"""Why Kconfig would not give an option the value asked for: the option's definitions in the
tree's Kconfig files, with their `depends on`, the enclosing `if`/`menu`/`choice`, and
whether it has a prompt, evaluated against the final .config.

Only read when the config check fails, so a plain line reader is enough: `source` is
followed from the top Kconfig (with $(SRCARCH)), help text is skipped, and a condition it
cannot evaluate (a $(macro)) is shown as written.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

_TOKEN = re.compile(r'\s*(\$\([^)]*\)|"[^"]*"|\'[^\']*\'|&&|\|\||!=|<=|>=|[!()=<>]|[A-Za-z0-9_.-]+)')
_SOURCE = re.compile(r'^\s*(o?r?source)\s+"([^"]+)"')


@dataclass
class Definition:
    where: str                                    # "arch/x86/Kconfig:123"
    depends: list[str] = field(default_factory=list)
    context: list[str] = field(default_factory=list)   # enclosing if / menu depends / choice depends
    prompt: bool = False
    choice: list[str] | None = None               # the other members when inside a choice


def read_definitions(src: Path, srcarch: str) -> dict[str, list[Definition]]:
    """symbol (no CONFIG_) -> its definitions, from the top Kconfig down."""
    defs: dict[str, list[Definition]] = {}
    _read(src, src / "Kconfig", srcarch, [], defs, set())
    return defs


def _read(src: Path, path: Path, srcarch: str, outer: list, defs: dict, seen: set) -> None:
    if path in seen or not path.is_file():
        return
    seen.add(path)
    stack = list(outer)            # entries: ("if", expr) / ("menu", expr or None) / ("choice", members)
    current: Definition | None = None
    pending_menu = False
    help_indent = None
    lines = path.read_text(errors="replace").splitlines()
    rel = path.relative_to(src)
    i = 0
    while i < len(lines):
        raw = lines[i]
        line_no = i + 1
        while raw.endswith("\\") and i + 1 < len(lines):
            i += 1
            raw = raw[:-1] + " " + lines[i]
        i += 1
        if help_indent is not None:
            if not raw.strip():
                continue
            indent = len(raw.expandtabs()) - len(raw.expandtabs().lstrip())
            if help_indent < 0:
                help_indent = indent
            if indent >= help_indent:
                continue
            help_indent = None
        text = raw.split("#", 1)[0].strip() if not raw.strip().startswith(("prompt", "bool", "tristate")) else raw.strip()
        if not text:
            continue
        word, _, rest = text.partition(" ")
        rest = rest.strip()
        m = _SOURCE.match(raw)
        if m:
            name = m.group(2).replace("$(SRCARCH)", srcarch)
            base = path.parent if m.group(1) in ("rsource", "orsource") else src
            for target in sorted(base.glob(name)) if "*" in name else [base / name]:
                _read(src, target, srcarch, stack, defs, seen)
            continue
        if word in ("config", "menuconfig"):
            current = Definition(f"{rel}:{line_no}", context=[_describe(e) for e in stack if e[1]])
            choice = next((e for e in reversed(stack) if e[0] == "choice"), None)
            if choice is not None:
                current.choice = choice[2]
                choice[2].append(rest)
            defs.setdefault(rest, []).append(current)
            pending_menu = False
        elif word == "if":
            stack.append(("if", rest))
            current = None
        elif word == "endif":
            _pop(stack, "if")
            current = None
        elif word == "menu":
            stack.append(("menu", None))
            pending_menu, current = True, None
        elif word == "endmenu":
            _pop(stack, "menu")
            current = None
        elif word == "choice":
            stack.append(("choice", None, []))
            pending_menu, current = True, None
        elif word == "endchoice":
            _pop(stack, "choice")
            current = None
        elif word == "depends" and rest.startswith("on "):
            expr = rest[3:].strip()
            if current is not None:
                current.depends.append(expr)
            elif pending_menu and stack:
                top = stack[-1]
                stack[-1] = (top[0], f"{expr} && {top[1]}" if top[1] else expr, *top[2:])
        elif word in ("bool", "tristate", "string", "int", "hex", "prompt") and current is not None:
            if '"' in rest or word == "prompt":
                current.prompt = True
        elif word in ("help", "---help---"):
            help_indent = -1
        elif word in ("comment", "mainmenu", "endmenu"):
            current = None


def _pop(stack: list, kind: str) -> None:
    for k in range(len(stack) - 1, -1, -1):
        if stack[k][0] == kind:
            del stack[k]
            return


def _describe(entry) -> str:
    return f"{entry[0]} {entry[1]}" if entry[0] != "if" else f"inside if {entry[1]}"


def evaluate(expr: str, values: dict[str, str]) -> int | None:
    """The tristate value (0, 1, 2) of a Kconfig expression, or None when it has a $(macro)."""
    tokens = _TOKEN.findall(expr)
    pos = 0

    def peek():
        return tokens[pos] if pos < len(tokens) else None

    def take():
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def value_of(tok: str) -> str | None:
        if tok.startswith("$("):
            return None
        if tok[0] in "\"'":
            return tok[1:-1]
        if tok in ("y", "m", "n"):
            return tok
        if f"CONFIG_{tok}" in values:
            return values[f"CONFIG_{tok}"].strip('"')
        return tok if re.fullmatch(r"-?(0x[0-9a-fA-F]+|[0-9]+)", tok) else "n"   # a number is itself

    def tristate(v: str | None) -> int | None:
        return None if v is None else {"y": 2, "m": 1}.get(v, 0)

    def primary():
        tok = take()
        if tok == "!":
            v = primary()
            return None if v is None else 2 - v
        if tok == "(":
            v = disjunction()
            if peek() == ")":
                take()
            return v
        if peek() in ("=", "!=", "<", ">", "<=", ">="):
            op, other = take(), take()
            a, b = value_of(tok), value_of(other)
            if a is None or b is None:
                return None
            if op in ("=", "!="):
                return 2 if (a == b) == (op == "=") else 0
            try:
                x, y = int(a, 0), int(b, 0)
            except ValueError:
                x, y = a, b
            return 2 if {"<": x < y, ">": x > y, "<=": x <= y, ">=": x >= y}[op] else 0
        return tristate(value_of(tok))

    def conjunction():
        v = primary()
        while peek() == "&&":
            take()
            w = primary()
            v = None if v is None or w is None else min(v, w)
        return v

    def disjunction():
        v = conjunction()
        while peek() == "||":
            take()
            w = conjunction()
            v = None if v is None or w is None else max(v, w)
        return v

    try:
        return disjunction()
    except (IndexError, TypeError):
        return None


def symbols_in(expr: str) -> list[str]:
    return [t for t in _TOKEN.findall(expr) if re.fullmatch(r"[A-Z][A-Z0-9_]*", t) and t not in ("y", "m", "n")]


def why(src: Path, srcarch: str, option: str, asked: str, values: dict[str, str]) -> str:
    """One phrase saying why OPTION (CONFIG_FOO) did not come out as ASKED, as far as Kconfig says."""
    name = option.removeprefix("CONFIG_")
    defs = read_definitions(src, srcarch)
    found = defs.get(name)
    if not found:
        close = difflib.get_close_matches(name, list(defs), n=3)
        hint = f"; close: {', '.join('CONFIG_' + c for c in close)}" if close else ""
        return f"no such option in this tree's Kconfig (wrong name?{hint})"
    reasons = []
    for d in found:
        unmet = []
        for expr in d.depends + [c.split(" ", 1)[1].removeprefix("if ") for c in d.context]:
            v = evaluate(expr, values)
            if v is None:
                unmet.append(f"{expr} (cannot evaluate here)")
            elif v == 0 or (v == 1 and asked == "y"):
                shown = ", ".join(f"{s}={values.get('CONFIG_' + s, 'n')}" for s in dict.fromkeys(symbols_in(expr)))
                unmet.append(f"{expr} [{shown}]" if shown else expr)
        if unmet:
            reasons.append(f"{d.where}: unmet dependency: depends on " + " && ".join(unmet))
        elif d.choice and asked == "y":
            others = [f"CONFIG_{c}" for c in d.choice if c != name and values.get(f"CONFIG_{c}") == "y"]
            if others:
                reasons.append(f"{d.where}: in a choice where {', '.join(others)} won: set it to n as well")
    if reasons:
        return "; ".join(reasons)
    if not any(d.prompt for d in found):
        return f"{found[0].where}: no prompt, so it cannot be set directly (only selected by other options)"
    return f"{found[0].where}: dependencies met; Kconfig chose otherwise (a select or a range?)"
