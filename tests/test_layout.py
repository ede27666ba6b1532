"""Layout noise: relinks that move code but not its machine code, their band, and verdicts.

Real gcc builds, real nm/objdump/valgrind, real runs; never asserted on time."""
from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
from scipy.stats import chi2

from dataclasses import replace

from conftest import flagbench
from flagbench import build, spec
from flagbench.report import build_tables, render, report_run
from flagbench.run import layout
from flagbench.run.kinds import cells_for_bench
from flagbench.run.engine import EXIT_OK, run_cells
from flagbench.run.executors import CallgrindExecutor
from flagbench.stats import BEYOND, WITHIN
from flagbench.store import Store

SRC = Path(__file__).resolve().parents[1] / "src"
LOOP_C = """
#include <stdint.h>
uint64_t step(uint64_t a, uint64_t i);
static const uint64_t table[4] = { 3, 5, 7, 11 };
__attribute__((noinline)) uint64_t spin(uint64_t n)
{
	uint64_t acc = 1;
	for (uint64_t i = 0; i < n; i++)
		acc = step(acc, i) + table[i & 3];
	return acc;
}
"""
STEP_C = """
#include <stdint.h>
uint64_t step(uint64_t a, uint64_t i);
__attribute__((noinline)) uint64_t step(uint64_t a, uint64_t i) { return (a ^ i) * 0x9e3779b97f4a7c15ULL; }
"""
TOML = """
sources = ["loop.c", "step.c"]
[variants]
base = {}
other = { cflags = ["-O1"] }
[[bench]]
name = "spin"
kind = "micro"
function = "spin"
metrics = ["time"]
layouts = 4
"""


def need(*tools):
    for tool in tools:
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (see scripts/install-deps)")


def experiment(d: Path, toml: str = TOML) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "loop.c").write_text(LOOP_C)
    (d / "step.c").write_text(STEP_C)
    (d / "experiment.toml").write_text(textwrap.dedent(toml).lstrip("\n"))
    return d


@pytest.fixture
def relinked(tmp_path, monkeypatch):
    """The cells of a micro bench with layouts = 4 over real gcc builds, and its executables."""
    need("gcc", "nm", "objdump")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    exp = spec.load(experiment(tmp_path / "exp"))
    builds = build.build(exp)
    work = tmp_path / "work"
    cells = cells_for_bench(exp.benches[0], builds, root=exp.root, workdir=work)
    exes = {c.variant: work / "spin" / c.variant / "x86_64" / "gcc" / "micro-spin" for c in cells}
    return exp, builds, cells, exes


def nm_addresses(exe: Path) -> dict[str, int]:
    out = subprocess.run(["nm", "--defined-only", str(exe)], capture_output=True, text=True, check=True).stdout
    return {parts[2]: int(parts[0], 16) for parts in map(str.split, out.splitlines()) if len(parts) == 3}


def disassembly(exe: Path, function: str) -> list[str]:
    """The function's instructions without addresses: absolute targets and rip-relative
    displacements become the symbol objdump names next to them."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", f"--disassemble={function}", str(exe)],
                         capture_output=True, text=True, check=True).stdout
    lines = []
    for line in out.split(f"<{function}>:", 1)[1].splitlines():
        m = re.match(r"\s*[0-9a-f]+:\s+(.*)", line)
        if not m:
            continue
        insn = re.sub(r"\s+#\s*[0-9a-f]+\s*(<[^>]+>)", r" \1", m.group(1))       # "# 4a26c0 <ops>"
        insn = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "(%rip)", insn)
        insn = re.sub(r"\b[0-9a-f]+ (<[^>]+>)", r"\1", insn)                     # "call 401234 <step>"
        lines.append(" ".join(insn.split()))
    return lines


def text_size(obj: Path) -> int:
    out = subprocess.run(["readelf", "-SW", str(obj)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        if len(fields) > 6 and fields[1] == ".text":
            return int(fields[5], 16)
    raise AssertionError(f"no .text in {obj}")


def test_k_layouts_are_k_programs_whose_code_moved_but_did_not_change(relinked):
    exp, builds, cells, exes = relinked
    assert [c.variant for c in cells] == ["base", "base@L1", "base@L2", "base@L3", "base@L4", "other"]
    relinks = [c for c in cells if "@" in c.variant]
    assert all(c.counted is None and c.timed is not None for c in relinks)   # time only
    assert all(exes[c.variant].is_file() for c in cells)

    addresses = {col: nm_addresses(exe) for col, exe in exes.items() if col != "other"}
    spin = {col: a["spin"] for col, a in addresses.items()}
    assert len(set(spin.values())) == 5, spin                    # five programs, five places
    assert cells[0].provenance["function_address"] == spin["base"]
    for c in relinks:
        pad, order = c.provenance["pad_bytes"], c.provenance["object_order"]
        assert pad % 16 == 0 and 16 <= pad <= 4096
        assert c.provenance["function_address"] == spin[c.variant]
        pads = [n for n in addresses[c.variant] if n.startswith("fb_layout_pad_")]
        assert pads == [f"fb_layout_pad_{pad}"]
        # everything after the padding moves by its size, plus step.o's text when the
        # shuffle put step.o (object 1) before loop.o; step.o's code is 16-aligned
        step_first = order == [1, 0]
        moved = pad + (-(-text_size(builds[0].objects[1]) // 16) * 16 if step_first else 0)
        assert spin[c.variant] - spin["base"] == moved, (c.variant, pad, order)
    assert {tuple(c.provenance["object_order"]) for c in relinks} == {(0, 1), (1, 0)}

    code = {col: disassembly(exe, "spin") for col, exe in exes.items() if col != "other"}
    assert any("<step>" in line for line in code["base"]) and len(code["base"]) > 5
    assert all(lines == code["base"] for lines in code.values())
    assert disassembly(exes["other"], "spin") != code["base"]    # -O1: the comparison can tell code apart


def test_layouts_count_the_same_instructions(relinked, tmp_path):
    """Layout moves code, not work: callgrind counts the relinks exactly alike. Each program
    runs from one path, since argv[0] alone changes glibc's startup count (strrchr)."""
    need("valgrind")
    _, _, cells, exes = relinked
    same_path = tmp_path / "run" / "micro-spin"
    same_path.parent.mkdir()
    counts = {}
    for col, exe in exes.items():
        if col == "other":
            continue
        shutil.copy2(exe, same_path)
        runs = [CallgrindExecutor().measure([str(same_path), "c", f"{n:010d}"]) for n in (1000, 2000)]
        assert all(m.ok for m in runs), [m.failure for m in runs]
        counts[col] = tuple(m.metrics["insns"] for m in runs)
    assert len(set(counts.values())) == 1, counts
    small, large = counts["base"]
    assert large > small


def test_isolation_pins_the_object_wherever_the_padding_ends(tmp_path, monkeypatch):
    """Seed 002's isolation as the alignment case does it: one function of the object aligned
    to 4096 keeps every function of that object at the same offset in its page."""
    need("gcc", "nm")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    case = Path(__file__).resolve().parents[1] / "cases" / "alignment"
    exp = spec.load(case)
    bench = replace(exp.benches[0], metrics=("time",), layouts=3)
    builds = build.build(exp, [c for c in exp.cells() if c.variant.name in ("default", "isolated")])
    cells = cells_for_bench(bench, builds, root=exp.root, workdir=tmp_path / "work")
    where = {c.variant: c.provenance.get("function_address") for c in cells if "@" in c.variant}
    assert sorted(where) == ["default@L1", "default@L2", "default@L3",
                             "isolated@L1", "isolated@L2", "isolated@L3"]
    assert len({where[f"default@L{i}"] % 4096 for i in (1, 2, 3)}) == 3       # moved within the page
    assert len({where[f"isolated@L{i}"] % 4096 for i in (1, 2, 3)}) == 1      # pinned


# -- band arithmetic and verdicts on stored samples ----------------------------------------

def _spread(median: float) -> list[float]:
    """Nine samples whose median is exactly `median`, within +-0.4 %."""
    return [median * (1 + d / 1000) for d in range(-4, 5)]


@pytest.fixture
def banded_store(tmp_path):
    s = Store(tmp_path / "fb.db")
    run = s.start_run("band", "h", {"variants": ["A", "B", "C", "D", "E"]})
    medians = {"A": 10.0, "A@L1": 10.3, "A@L2": 9.8, "A@L3": 10.1,   # band 0.98 .. 1.03
               "B": 11.0,    # +10 %: CI ~ [1.09, 1.11], above the band
               "C": 10.2,    # +2 %: CI inside the band
               "D": 9.0,     # -10 %: below the band
               "E": 10.3}    # +3 %: CI ~ [1.025, 1.035] straddles the band's top
    for column, median in medians.items():
        for value in _spread(median):
            s.add_sample(run, "loop", f"{column}/x86_64/gcc", "ns_per_iter", value, unit="ns", executor="native")
        s.add_sample(run, "loop", f"{column}/x86_64/gcc", "insns_per_iter", 5.0, unit="insns", executor="callgrind")
    yield s, run
    s.close()


def test_band_and_verdicts_from_stored_samples(banded_store):
    s, run = banded_store
    tables = build_tables(s.samples(run), ["A", "B", "C", "D", "E"])
    timed, = [t for t in tables if not t.exact]
    assert timed.variants == ["A", "B", "C", "D", "E"]
    assert timed.layouts == {"A": ["A@L1", "A@L2", "A@L3"]}
    row, = timed.rows
    band = row.bands["A"]
    assert band.n_layouts == 3
    assert band.low == pytest.approx(0.98) and band.high == pytest.approx(1.03)
    assert band.ratios == pytest.approx((1.03, 0.98, 1.01))
    # Kruskal-Wallis by hand: the four groups of 9 do not overlap, so their ranks are
    # A@L2 1..9, A 10..18, A@L3 19..27, A@L1 28..36 (rank sums 45, 126, 207, 288)
    h = 12 / (36 * 37) * (45**2 + 126**2 + 207**2 + 288**2) / 9 - 3 * 37
    assert h == pytest.approx(32.8378, abs=1e-4)
    assert band.p_value == pytest.approx(chi2.sf(h, 3))   # df = groups - 1
    assert row.changes["B"].ci_low > 1.03 and row.changes["E"].ci_low < 1.03 < row.changes["E"].ci_high
    assert row.band_verdicts == {"B": BEYOND, "C": WITHIN, "D": BEYOND, "E": WITHIN}
    assert row.changes["E"].verdict == "slower"   # significant, yet within layout noise
    exact, = [t for t in tables if t.exact]
    assert exact.layouts == {"A": ["A@L1", "A@L2", "A@L3"]} and not exact.rows[0].band_verdicts


def test_band_in_every_format(banded_store):
    s, run = banded_store
    text = report_run(s, run, "text")
    words = " ".join(text.split())    # a cell may wrap to fit 100 columns
    assert "-2.0 % .. +3.0 % (3 layouts, p=0.000)" in words and BEYOND in text and WITHIN in text
    assert "A@L1" not in text                                   # relinks are the band, not columns
    md = report_run(s, run, "md")
    timed = md.split("exact counts")[0]    # its table may come in column groups, to fit 100 columns
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in timed.splitlines() if line.startswith("|")]
    rows = [r for r in rows if not set("".join(r)) <= set("-:")]
    header = [c for r in rows if r[0] == "variant" for c in r[1:]]
    assert header == ["median", "vs A", "layout band", "vs A's band"]
    by_variant: dict = {}
    for r in rows:
        if r[0] != "variant":
            by_variant.setdefault(r[0], [r[0]]).extend(r[1:])
    assert by_variant["A"][3:] == ["-2.0 % .. +3.0 % (3 layouts, p=0.000)", ""]
    assert by_variant["B"][4] == BEYOND and by_variant["E"][4] == WITHIN and by_variant["B"][3] == ""
    doc = json.loads(report_run(s, run, "json"))
    table, = [t for t in doc["tables"] if t["metric"] == "ns_per_iter"]
    assert table["layouts"] == {"A": ["A@L1", "A@L2", "A@L3"]}
    r = table["rows"][0]
    assert r["bands"]["A"]["low"] == pytest.approx(0.98) and r["band_verdicts"]["D"] == BEYOND
    assert r["layouts"]["A@L2"]["median"] == pytest.approx(9.8) and r["layouts"]["A@L2"]["ratio"] == pytest.approx(0.98)
    rows = [x for x in csv.DictReader(io.StringIO(report_run(s, run, "csv"))) if x["metric"] == "ns_per_iter"]
    by = {x["variant"]: x for x in rows}
    assert float(by["A"]["band_low"]) == pytest.approx(0.98) and float(by["A"]["band_high"]) == pytest.approx(1.03)
    assert by["C"]["band_verdict"] == WITHIN and by["B"]["band_verdict"] == BEYOND
    assert by["A@L1"]["verdict"] == "layout" and by["A@L1"]["baseline"] == "A"
    assert float(by["A@L1"]["ratio"]) == pytest.approx(1.03)


def test_no_layouts_no_band_columns():
    samples = [dict(bench="b", metric="ns_per_iter", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={}, value=x) for v in ("O2", "O3") for x in _spread(10.0)]
    md = render(build_tables(samples, ["O2", "O3"]), "md")
    assert "band" not in md and "layout" not in md


# -- a whole run ------------------------------------------------------------------------------

def test_run_with_layouts_stores_relinks_and_reports_the_band(tmp_path, monkeypatch):
    need("gcc")
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path / "cache"))
    exp = spec.load(experiment(tmp_path / "exp", TOML.replace("layouts = 4", "layouts = 2")))
    builds = build.build(exp)
    bench = replace(exp.benches[0], samples=2, warmup=0)
    cells = cells_for_bench(bench, builds, root=exp.root, workdir=tmp_path / "work")
    with Store(tmp_path / "fb.db") as store:
        outcome = run_cells(store, cells, experiment=exp.name, experiment_hash=exp.hash,
                            provenance={"variants": ["base", "other"]}, progress=False)
        assert outcome.status == EXIT_OK
        stored = {s["cell"] for s in store.samples(outcome.run_id)}
        assert stored == {"base/x86_64/gcc", "base@L1/x86_64/gcc", "base@L2/x86_64/gcc", "other/x86_64/gcc"}
        pads = {s["provenance"].get("pad_bytes") for s in store.samples(outcome.run_id) if "@" in s["cell"]}
        assert pads == {p.pad for p in layout.plan(2, 2)}
        text = report_run(store, outcome.run_id, "text")
    assert "(2 layouts)" in text and "layout band" in text


@pytest.mark.parametrize("line, message", [
    ("layouts = -1", "layouts = -1: must be at least 0"),
    ("layouts = true", "layouts must be a whole number"),
    ("layouts = 257", "layouts = 257: must be at least 0 and at most 256"),
    ("layouts = 2\nlayout_variants = [\"nosuch\"]", "layout_variants names no variant 'nosuch'"),
    ("layouts = 2\nlayout_variants = \"base\"", "layout_variants must be a non-empty list"),
])
def test_bad_layout_keys_are_one_line_exit_2(tmp_path, line, message):
    d = experiment(tmp_path / "exp", TOML.replace("layouts = 4", line))
    out = flagbench("run", str(d), "--db", str(tmp_path / "fb.db"),
                    env={build.CACHE_ENV: str(tmp_path / "cache")})
    assert out.returncode == 2, out.stderr
    # refused by spec before anything is built: one line, at the key's line
    assert out.stderr.count("\n") == 1 and message in out.stderr, out.stderr
    assert f"{d / 'experiment.toml'}:1" in out.stderr and "Traceback" not in out.stderr


def test_layouts_on_other_kinds_is_refused(tmp_path):
    d = experiment(tmp_path / "exp", TOML.replace('kind = "micro"', 'kind = "memcpy"').replace(
        'function = "spin"', 'functions = ["spin"]'))
    out = flagbench("run", str(d), "--db", str(tmp_path / "fb.db"), cache=tmp_path / "cache")
    assert out.returncode == 2 and "unknown key 'layouts' for kind memcpy" in out.stderr
