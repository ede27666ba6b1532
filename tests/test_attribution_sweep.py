"""A memcpy sweep's rows get their causes (causes._memfn_causes): real gcc builds, callgrind counts
and timed runs (whose numbers are never asserted, only the causes, which do not depend on them).

`copy_words` copies 8 bytes a turn; variant `unroll` adds a 16-byte turn before it (its code
changes), while `copy_bytes` is the same code in both builds. Each row of each table, timed and
counted, says: `copy_words` rows direct (the function measured changed code), `copy_bytes` rows
layout (no changed code, counts the same), and a column measuring another function than the
baseline's direct too.
"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import flagbench_isolated as flagbench, write_experiment

pytestmark = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("valgrind")),
                                reason="needs gcc and valgrind")

SOURCE = """#include <stddef.h>
void *copy_bytes(void *d, const void *s, size_t n);
void *copy_words(void *d, const void *s, size_t n);
void *copy_bytes(void *d, const void *s, size_t n) {
    char *dd = d; const char *ss = s;
    for (size_t i = 0; i < n; i++) { dd[i] = ss[i]; __asm__ volatile("" ::: "memory"); }
    return d;
}
void *copy_words(void *d, const void *s, size_t n) {
    char *dd = d; const char *ss = s; size_t i = 0;
#ifdef UNROLL
    for (; i + 16 <= n; i += 16) { __builtin_memcpy(dd + i, ss + i, 16); __asm__ volatile("" ::: "memory"); }
#endif
    for (; i + 8 <= n; i += 8) { __builtin_memcpy(dd + i, ss + i, 8); __asm__ volatile("" ::: "memory"); }
    for (; i < n; i++) dd[i] = ss[i];
    return d;
}
"""
TOML = """
sources = ["mc.c"]
targets = ["x86_64"]
compilers = ["gcc"]
cflags = ["-O2"]
[variants]
base = {}
unroll = { defines = { UNROLL = "1" } }
""" + "".join(f"""
[[bench]]
name = "{name}"
kind = "memcpy"
functions = {functions}
sizes = [64, 1024]
alignments = [[0, 0]]
metrics = {metrics}
samples = 3
""" for name, functions, metrics in (("words", '["copy_words"]', '["time", "insns"]'),
                                     ("bytes", '["copy_bytes"]', '["time", "insns"]'),
                                     ("both", '["copy_bytes", "copy_words"]', '["insns"]')))


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    root = write_experiment(tmp_path_factory.mktemp("sweep-causes"), TOML, {"mc.c": SOURCE})
    done = flagbench("run", root, "--db", root / "fb.db", cwd=root)
    assert done.returncode == 0, done.stderr
    return root, done.stdout


def _causes(text: str, title: str) -> list[str]:
    """The cause lines under the table titled TITLE (up to the next table)."""
    start = text.index(title)
    rest = text[text.index("\n", start):]
    lines = []
    for line in rest.splitlines()[1:]:
        if " · " in line and not line.startswith(" "):   # the next table's title
            break
        if "cause: " in line:
            lines.append(line)
    return lines


def test_every_sweep_row_says_its_cause(measured):
    _, text = measured
    for title in ("words · MB/s", "words · exact counts"):
        assert _causes(text, title) == [f"size={n}: cause: direct: copy_words changed code (the function measured)"
                                        for n in (64, 1024)], title
    assert _causes(text, "bytes · exact counts") == [
        f"size={n}: cause: layout: no changed code ran; counts the same: not a regression" for n in (64, 1024)]
    timed = _causes(text, "bytes · MB/s")   # the counts' cause: same code, counts the same
    assert len(timed) == 2 and all(": cause: layout: no changed code ran" in line for line in timed), timed
    both = _causes(text, "both · exact counts")
    # the baseline column is one function's: the other function's columns measure other code
    assert "unroll+copy_words size=64: cause: direct: copy_words changed code (the function measured)" in both
    assert sum(": cause: direct: another function: copy_" in line for line in both) == 4, both
    assert all(len(line) < 100 for line in text.splitlines() if "cause: " in line)


def test_sweep_causes_in_json(measured):
    root, _ = measured
    done = flagbench("report", "--db", root / "fb.db", "--format", "json", cwd=root)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    kinds = {(t["bench"], t["exact"]): {c["cause"]["kind"] for c in t.get("causes", [])} for t in doc["tables"]}
    assert kinds[("words", True)] == kinds[("words", False)] == {"direct"}
    assert kinds[("bytes", True)] == kinds[("bytes", False)] == {"layout"}
    bytes_exact = next(t for t in doc["tables"] if t["bench"] == "bytes" and t["exact"])
    assert all(c["attribution"]["total_delta"] == 0 for c in bytes_exact["causes"])
