"""The README and docs/ name only what exists: every link resolves (file and heading), every
repository path and module they name is there, and every verb is in the index with a
working `--help`."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT, flagbench
from flagbench.cli import VERBS

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
ROOTS = ("src/", "tests/", "bench/", "cases/", "docs/", ".ci/", "bin/", "scripts/install-deps")
PACKAGE = ROOT / "src" / "flagbench"
# flagbench's package directories, and `kernel/` where they used to be: a path starting with one
# names our module (a `kernel/sys.c` or `lib/string.c` is the Linux tree's, not checked)
PACKAGE_DIRS = {p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.name.startswith("_")} | {"kernel"}
MOVED = re.compile(r"(?<![\w.])kernel\.(?:kbuild|guest|boot|kexec|hostrun|source|summary)\.\w+")   # kernel/ is gone
MODULE = re.compile(r"(?<![\w./-])((?:[a-z_]+/)+[a-z_]+\.(?:py|c|h))\b")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces '-'."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    text = FENCE.sub("", doc.read_text())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def prose(doc: Path) -> str:
    return FENCE.sub("", doc.read_text())


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_resolve(doc):
    broken = []
    for target in LINK.findall(prose(doc)):
        if re.match(r"[a-z]+:", target):
            continue                          # https:, mailto: ...: not ours to check offline
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


def named_paths(text: str) -> set[str]:
    """Repository paths and package modules a text names in `code` spans."""
    out = set()
    for span in CODE.findall(text):
        for word in span.split():
            word = word.strip(",;:()'\"").split(":")[0]
            if "<" in word or "*" in word or "{" in word or word.startswith("/"):
                continue
            if word.startswith(ROOTS) or (MODULE.fullmatch(word) and ours(word)):
                out.add(word)
    return out


def ours(path: str) -> bool:
    first = path.split("/")[0]
    return first in PACKAGE_DIRS and (path.endswith(".py") or first not in {"kernel", "lib", "fs"})


def exists(path: str) -> bool:
    return any((base / path).exists() for base in (ROOT, PACKAGE, PACKAGE / "run"))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_named_paths_exist(doc):
    missing = sorted(p for p in named_paths(prose(doc)) if not exists(p))
    assert not missing, f"{doc.name} names what does not exist: {missing}"


def test_comments_name_modules_that_exist():
    """Comments and docstrings of the code and tests name today's modules, not moved ones."""
    stale = []
    for f in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.c"), *(ROOT / "tests").glob("*.py"),
              *(ROOT / "bench").glob("*.py")]:
        text = f.read_text()
        stale += [f"{f.relative_to(ROOT)}: {m}" for m in MODULE.findall(text) if ours(m) and not exists(m)]
        stale += [f"{f.relative_to(ROOT)}: {m}" for m in MOVED.findall(text)]
    assert not stale, stale


def test_every_verb_in_the_index_with_help():
    index = (ROOT / "docs" / "index.md").read_text()
    absent = [v for v in VERBS if f"`flagbench {v}`" not in index]
    assert not absent, f"verbs missing from docs/index.md: {absent}"
    for verb in VERBS:
        r = flagbench(verb, "--help")
        assert r.returncode == 0 and "usage: flagbench " + verb in r.stdout, (verb, r.stderr[-300:])


def test_readme_fits_a_five_minute_read():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200
