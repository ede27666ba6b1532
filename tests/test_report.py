"""`flagbench report`: tables from a real store, in every format, through the real CLI."""
import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from flagbench.report import cells
from flagbench.report import build_tables, render
from flagbench.store import Store


def flagbench(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "flagbench", *args], capture_output=True, text=True, cwd=cwd)


@pytest.fixture
def db(tmp_path):
    """A stored run: a memcpy sweep (template 20 % faster for small sizes), a wis run, exact counts, one failure."""
    path = tmp_path / "fb.db"
    s = Store(path)
    s.start_run("older", "h0", {})
    run = s.start_run("memcpy-arm", "h1", {"variants": ["kernel", "template"]})
    rng = np.random.default_rng(7)
    expected = {}
    for size in (4096, 32, 100):                          # stored out of order on purpose
        for dalign, salign in ((1, 3), (0, 0)):
            for variant in ("template", "kernel"):
                speedup = 1.2 if (variant == "template" and size < 4096) else 1.0
                values = 100.0 * speedup * np.exp(rng.normal(0, 0.02, 10))
                cell = f"{variant}/x86_64/gcc:size={size},dalign={dalign},salign={salign}"
                expected[(size, dalign, variant)] = float(np.median(values))
                for v in values:
                    s.add_sample(run, "memcpy", cell, "MB/s", v, unit="MB/s", executor="native")
                s.add_sample(run, "memcpy", cell.replace("x86_64", "aarch64"), "insns", 1000 * speedup,
                             unit="insns", executor="qemu")
    for mode in ("threads", "processes"):
        for tasks in (2, 1):
            for variant in ("kernel", "template"):
                for v in 1e6 * tasks * np.exp(rng.normal(0, 0.02, 9)):
                    s.add_sample(run, "getppid", f"{variant}/x86_64/gcc:mode={mode},tasks={tasks}",
                                 "per_second", v, unit="iter/s", executor="native")
    s.finish_cell(run, "memcpy", "broken/x86_64/gcc:size=1,dalign=1,salign=0", "failed", "SIGBUS")
    s.close()
    return path, run, expected


def test_memcpy_table_is_alignment_by_size_with_verdicts(db):
    path, run, expected = db
    out = flagbench("report", "--db", str(path), "--format", "json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["run"]["id"] == run and doc["run"]["experiment"] == "memcpy-arm"
    [sweep] = [t for t in doc["tables"] if t["bench"] == "memcpy" and t["metric"] == "MB/s"]
    assert sweep["variants"] == ["kernel", "template"] and sweep["baseline"] == "kernel"
    assert sweep["param_keys"] == ["dalign", "salign", "size"]
    rows = [(r["params"]["dalign"], r["params"]["size"]) for r in sweep["rows"]]
    assert rows == [("0", "32"), ("0", "100"), ("0", "4096"), ("1", "32"), ("1", "100"), ("1", "4096")]
    for r in sweep["rows"]:
        size, dalign = int(r["params"]["size"]), int(r["params"]["dalign"])
        assert r["variants"]["kernel"]["median"] == pytest.approx(expected[(size, dalign, "kernel")])
        assert r["variants"]["template"]["n"] == 10
        verdict = r["comparisons"]["template"]["verdict"]
        assert verdict == ("faster" if size < 4096 else "~")   # MB/s: higher is better
    assert doc["failures"][0]["reason"] == "SIGBUS"


def test_exact_counts_and_wis_mode_by_tasks(db):
    path, run, _ = db
    doc = json.loads(flagbench("report", str(run), "--db", str(path), "--format", "json").stdout)
    [counts] = [t for t in doc["tables"] if t["exact"]]
    assert counts["metric"] == "exact counts" and counts["target"] == "aarch64"
    assert counts["param_keys"][0] == "count" and {r["params"]["count"] for r in counts["rows"]} == {"insns"}
    small = counts["rows"][0]["comparisons"]["template"]
    assert small["verdict"] == "exact" and small["ratio"] == pytest.approx(1.2)
    [wis] = [t for t in doc["tables"] if t["bench"] == "getppid"]
    assert [(r["params"]["mode"], r["params"]["tasks"]) for r in wis["rows"]] == [
        ("processes", "1"), ("processes", "2"), ("threads", "1"), ("threads", "2")]


def test_text_md_csv_formats(db):
    path, run, expected = db
    text = flagbench("report", "--db", str(path)).stdout
    assert "memcpy · MB/s · x86_64/gcc" in text and "faster" in text and "FAILED" in text and "SIGBUS" in text
    md = flagbench("report", "memcpy-arm", "--db", str(path), "--format", "md").stdout
    section = md.split("**memcpy** · MB/s · x86_64/gcc")[1].split("**")[0]
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert [c.strip() for c in table[0].split("|")[1:-1]] == [
        "dalign", "salign", "size", "kernel", "template", "template vs kernel (higher is better)"]
    assert len(table) == 2 + 6 and len({len(line) for line in table}) == 1   # aligned: pasteable as plain text
    first = [c.strip() for c in table[2].split("|")[1:-1]]
    assert first[:5] == ["0", "0", "32", f"{expected[(32, 0, 'kernel')]:.2f}", f"{expected[(32, 0, 'template')]:.2f}"]
    assert first[5].endswith("faster") and first[5].startswith("+")
    assert f"{expected[(32, 0, 'kernel')]:.2f}" in md
    rows = list(csv.DictReader(io.StringIO(flagbench("report", "--db", str(path), "--format", "csv").stdout)))
    one = [r for r in rows if r["params"] == "size=32,dalign=0,salign=0" and r["metric"] == "MB/s"]
    assert [r["variant"] for r in one] == ["kernel", "template"]
    assert one[1]["verdict"] == "faster" and float(one[1]["ratio"]) > 1.1
    assert float(one[0]["median"]) == pytest.approx(expected[(32, 0, "kernel")])
    assert any(r["verdict"] == "failed" and r["warnings"] == "SIGBUS" for r in rows)


def test_list_and_pick_runs(db):
    path, run, _ = db
    listing = flagbench("report", "--db", str(path), "--list").stdout.splitlines()
    assert len(listing) == 2 and "memcpy-arm" in listing[1]
    older = flagbench("report", "older", "--db", str(path), "--format", "json")
    assert json.loads(older.stdout)["tables"] == []


@pytest.mark.parametrize("args, message", [
    (["--db", "missing.db"], "no such results database"),
    (["42", "--db", "fb.db"], "no run 42"),
    (["nosuch", "--db", "fb.db"], "no run 'nosuch'"),
    (["--db", "garbage.db"], "garbage.db"),
    (["--db", "fb.db", "--format", "xml"], "invalid choice"),
])
def test_bad_input_is_one_line_exit_2(db, args, message):
    path, _, _ = db
    (path.parent / "garbage.db").write_bytes(b"\x00not a database" * 100)
    out = flagbench("report", *args, cwd=path.parent)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and message in out.stderr
    assert "Traceback" not in out.stderr


def test_empty_database_is_a_user_error(tmp_path):
    Store(tmp_path / "fb.db").close()
    out = flagbench("report", "--db", str(tmp_path / "fb.db"))
    assert out.returncode == 2 and "no runs stored yet" in out.stderr


def test_variant_order_falls_back_to_sorted_and_missing_baseline_gives_dash():
    samples = [dict(bench="b", metric="wall_ns", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={"n": n}, value=1.0) for v, n in (("zeta", "1"), ("alpha", "1"), ("zeta", "2"))]
    [t] = build_tables(samples)
    assert t.variants == ["alpha", "zeta"]
    md = render([t], "md")
    last = [c.strip() for c in md.splitlines()[-2].split("|")[1:-1]]
    assert last == ["2", "-", "1.00", "-"]


def test_many_variants_print_a_pivot():
    """Seven memcpy implementations: one row per point, one column per implementation, each cell the
    median and its change against the baseline (the seed's table); the long form stays in json/csv."""
    names = [f"impl{i}" for i in range(5)]
    samples = [dict(bench="memcpy", metric="MB/s", unit="MB/s", variant=v, target="x86_64", compiler="gcc",
                    params={"size": size, "dalign": "0"}, value=100.0 * (1 + i) + j)
               for i, v in enumerate(names) for j in range(9) for size in ("32", "4096")]
    md = render(build_tables(samples, names), "md")
    assert max(len(line) for line in md.splitlines()) <= 100
    # too wide for a mail as one table: split into tables that each repeat the row's key columns
    parts = [[[c.strip() for c in line.split("|")[1:-1]] for line in part.splitlines() if line.startswith("|")]
             for part in md.split("\n\n") if part.startswith("|")]
    assert len(parts) >= 2 and all(p[0][:3] == ["dalign", "size", "impl0 (baseline; higher is better)"] for p in parts)
    assert [c for p in parts for c in p[0][3:]] == names[1:]
    rows = [sum((p[i][3:] for p in parts[1:]), parts[0][i]) for i in range(2, len(parts[0]))]
    assert [r[:2] for r in rows] == [["0", "32"], ["0", "4096"]]
    assert rows[0][2] == "104.00"
    assert rows[0][3] == "204.00 (+96.2 % faster)"   # 204 / 104: every pairwise ratio is 1.9615
    rows_csv = list(csv.DictReader(io.StringIO(render(build_tables(samples, names), "csv"))))
    assert len(rows_csv) == 2 * 5


HOSTILE_NAMES = ["a|b<script>alert(1)</script>", "back`tick", "new\nline", "=cmd()", "-2+3", "@sum", "esc\x1b[31mred"]


def _hostile_tables():
    samples = [dict(bench=name, metric="ns_per_iter", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={"size": "32"}, value=base + i)
               for name in HOSTILE_NAMES for v, base in (("old", 10.0), ("new", 20.0)) for i in range(6)]
    return build_tables(samples, ["old", "new"])


def test_md_tables_keep_hostile_names_in_one_cell_and_as_text():
    """Issue 11: a name with a pipe, markup, a backtick or a newline must not split a row or pass HTML."""
    md = render(_hostile_tables(), "md")
    assert not re.search(r"(?<!\\)<script>", md) and "\x1b" not in md
    for line in md.splitlines():
        if line.startswith("|"):   # every row of every table has as many cells as its header
            assert len(re.findall(r"(?<!\\)\|", line)) == 5, line
    titles = [line for line in md.splitlines() if line.startswith("**")]
    assert len(titles) == len(HOSTILE_NAMES)     # the newline did not start a new line
    assert any("a\\|b\\<script>" in t for t in titles) and any("back\\`tick" in t for t in titles)


def test_csv_cells_that_look_like_formulas_are_prefixed():
    rows = list(csv.reader(io.StringIO(render(_hostile_tables(), "csv"))))
    benches = {r[0] for r in rows[1:]}
    assert {"'=cmd()", "'-2+3", "'@sum"} <= benches
    assert not any(cell.startswith(("=", "+", "-", "@")) for r in rows[1:] for cell in r
                   if not re.fullmatch(r"-?[\d.e+-]+", cell))   # numbers stay numbers


def test_text_shows_control_characters_escaped():
    text = render(_hostile_tables(), "text")
    assert "\x1b" not in text and "esc\\x1b[31mred" in text and "new\\nline" in text


def test_html_escapes_every_name():
    page = render(_hostile_tables(), "html")
    assert "<script" not in page.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "\x1b" not in page


def test_html_plots_per_table_kind(db):
    """The sweep: a panel per alignment with a line per implementation; will-it-scale: a panel per mode
    with a line per variant; timed comparisons: a forest; exact counts and the failure: tables only."""
    path, run, _ = db
    out = flagbench("report", str(run), "--db", str(path), "--format", "html", "-o", str(path.parent / "r.html"))
    assert out.returncode == 0 and out.stdout == ""
    page = (path.parent / "r.html").read_text()
    assert page.count('<svg xmlns="http://www.w3.org/2000/svg" class="plot"') >= 2 + 2 + 1
    for panel in ("aligned", "dst+1, src+3", "processes", "threads"):
        assert f'font-weight="600">{panel}</text>' in page, panel
    # 2 sweep panels and 2 wis panels of 2 lines each; the aarch64 counts are "insns", not per byte: no plot
    assert page.count('class="series"') == 2 * 2 + 2 * 2
    assert "SIGBUS" in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_output_file_that_cannot_be_written_is_one_line(db, tmp_path):
    path, _, _ = db
    (tmp_path / "a-file").write_text("")
    out = flagbench("report", "--db", str(path), "--format", "html", "-o", str(tmp_path / "a-file" / "r.html"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and "a-file" in out.stderr


def test_case_summary_lines():
    """One line per bench and target; one variant: its change; all alike: said once; many columns:
    best and worst; sizes linked; a target with objects only: its size line."""
    from flagbench.report.doc import Link
    from flagbench.report.summary import case_summary
    samples = [dict(bench="loop", metric=m, unit=u, variant=v, target="x86_64", compiler="gcc", params={}, value=x)
               for v, base in (("a", 10.0), ("b", 20.0), ("c", 30.0), ("d", 40.0))
               for m, u, x in [("ns_per_iter", "ns", base + i / 10) for i in range(6)] + [("insns_per_iter", "insns", 7.0)]]
    samples += [dict(bench="sweep", metric="MB/s", unit="MB/s", variant=v, target="x86_64", compiler="gcc",
                     params={"size": str(size)}, value=speed * size + i)
                for v, speed in (("bytes", 1.0), ("words", 4.0), ("rep", 9.0), ("libc", 16.0), ("two", 2.0))
                for size in (32, 4096) for i in range(6)]
    tables = build_tables(samples, ["a", "b", "c", "d", "bytes", "words", "rep", "libc", "two"])
    grid = case_summary(tables, prefix="case", baseline="a",
                        sizes={(v, "x86_64", "gcc"): ("+8 B", f"case-size-{v}") for v in "bcd"} |
                              {("b", "hppa64", "gcc"): ("+4 B", "case-size-hppa64")})
    rows = {(r[0][0], r[1][0]): r for r in grid.rows}
    loop = rows[("loop", "x86_64/gcc")]
    timed = [x.text for x in loop[2] if isinstance(x, Link)]
    assert [t.split()[0] for t in timed] == ["b", "c", "d"] and all(t.endswith("% slower") for t in timed)
    assert 90 < float(timed[0].split()[1]) < 110 and 290 < float(timed[2].split()[1]) < 310   # 2x, 4x
    assert [x.text for x in loop[3]] == ["all 3: +0.00 % insns/iter"] and loop[4][0].text == "all 3: +8 B"
    sweep = rows[("sweep", "x86_64/gcc")][2]
    assert sweep[0] == "vs bytes: " and re.fullmatch(r"words geomean \+2\d\d\.\d % \(2 faster of 2\)", sweep[1].text)
    assert sweep[2] == "; best " and re.fullmatch(r"libc geomean \+14\d\d\.\d % \(2 faster of 2\)", sweep[3].text)
    assert re.fullmatch(r"two geomean \+9\d\.\d % \(2 faster of 2\)", sweep[5].text)   # about 2x: the worst
    assert rows[("(size only)", "hppa64/gcc")][4][0].text == "+4 B"
    assert all(x.anchor.startswith("case-") for r in grid.rows for cell in r for x in cell if isinstance(x, Link))


def test_spread_note_names_the_worst_cells_and_their_values():
    wide = [10, 20, 10, 20, 10, 20, 15, 15, 12]          # IQR/median 10/15 = 67 %
    samples = [dict(bench="b", metric="ns_per_iter", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={"size": size}, value=x)
               for size in ("32", "64") for v, values in (("old", wide if size == "32" else [10.0] * 9),
                                                            ("new", [11.0 + i / 100 for i in range(9)]))
               for x in values]
    [t] = build_tables(samples, ["old", "new"])
    [note] = [n for n in cells.notes(t) if "spread" in n]
    assert note == "high spread (IQR/median above 10 %) in 1 cell: old@size=32 67 %"


import os  # noqa: E402
import tempfile  # noqa: E402

# hypothesis keeps caches in .hypothesis/ of the working directory: not in the checkout
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "flagbench-hypothesis"))
from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=150, deadline=None, database=None)
@given(name=st.text(min_size=1, max_size=30))
def test_any_name_stays_one_md_cell_and_html_text(name):
    """Issue 11, as a property: whatever a name holds, every md table row keeps its cell count, no
    raw tag reaches the md, and the html shows the name as text (controls escaped)."""
    samples = [dict(bench="b", metric="ns_per_iter", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={"size": name}, value=base + i)
               for v, base in (("old", 10.0), ("new", 20.0)) for i in range(6)]
    tables = build_tables(samples, ["old", "new"])
    md = render(tables, "md")
    # a long name makes the table too wide for a mail: split into tables that repeat the name
    # column, or one record a row; every table keeps its cell count on every line
    tables_md = [[line for line in part.splitlines() if line.startswith("|")] for part in md.split("\n\n")]
    tables_md = [t for t in tables_md if t]
    assert sum(len(t) - 2 for t in tables_md) in (0, 1, 2, 3), tables_md
    for t in tables_md:
        pipes = {len(re.findall(r"(?<!\\)\|", r)) for r in t}
        assert len(pipes) == 1 and len(t) == 3, t
    assert max(len(line) for line in md.splitlines() if not line.startswith("| ")) <= 100 or len(name) > 20
    # no raw tag, autolink or entity: `<` and `&` that could start one are backslash-escaped
    assert not re.search(r"(?<!\\)(<[A-Za-z/!?]|&[A-Za-z#])", re.sub(r'<a id="[a-z0-9-]*"></a>', "", md))
    from html.parser import HTMLParser

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.cells, self.inside = [], False

        def handle_starttag(self, tag, attrs):
            self.inside = tag == "td"

        def handle_data(self, data):
            if self.inside:
                self.cells.append(data)

    parser = Cells()
    parser.feed(render(tables, "html"))
    shown = "".join(c if c >= " " or c in "\n\t" else f"\\x{ord(c):02x}" for c in name)
    shown = shown.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    assert shown in parser.cells


def test_case_summary_of_a_booted_guest():
    """A guest bench's line gives the kernel's instructions per iteration; its per-symbol kernel
    profile stays in the tables, not the summary."""
    from flagbench.report.summary import case_summary
    samples = [dict(bench="page_fault", metric=m, unit="insns", variant=v, target="x86_64", compiler="gcc",
                    params={"mode": "processes", "tasks": "1"}, value=x)
               for v, k in (("default", 2140.0), ("unrolled", 2188.0))
               for m, x in (("kernel_insns_per_iter", k), ("user_insns_per_iter", 6.0))]
    samples += [dict(bench="page_fault kernel profile", metric="insns_per_iter:sync_regs", unit="insns",
                     variant=v, target="x86_64", compiler="gcc", params={"mode": "processes", "tasks": "1"},
                     value=x) for v, x in (("default", 30.0), ("unrolled", 68.0))]
    tables = build_tables(samples, ["default", "unrolled"])
    grid = case_summary(tables, prefix="k", baseline="default")
    assert [r[0][0] for r in grid.rows] == ["page_fault"]
    assert [x.text for x in grid.rows[0][3]] == [f"{(2188 / 2140 - 1) * 100:+.2f} % kernel insns/iter"]
    assert grid.rows[0][2] == ["no timing verdict: a booted guest's time is emulated"]   # work is not speed


def test_work_and_time_that_disagree_are_both_shown_and_labelled():
    """Seed 003's copy: twice the instructions, half the time. The summary gives both, in columns
    named time and work, and says they disagree rather than making the count a speed verdict."""
    from flagbench.report.doc import Link
    from flagbench.report.summary import case_summary
    rng = np.random.default_rng(5)
    samples = [dict(bench="copy", metric="ns_per_iter", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={}, value=x) for v, base in (("default", 12.0), ("unrolled", 6.3))
               for x in base * np.exp(rng.normal(0, 0.01, 10))]
    samples += [dict(bench="copy", metric="insns_per_iter", unit="insns", variant=v, target="x86_64",
                     compiler="gcc", params={}, value=x) for v, x in (("default", 42.0), ("unrolled", 90.0))]
    grid = case_summary(build_tables(samples, ["default", "unrolled"]), prefix="c", baseline="default")
    assert grid.header[2].startswith("time") and grid.header[3].startswith("work")
    [row] = grid.rows
    assert row[2][0].text.endswith("faster") and "%" in row[2][0].text
    assert isinstance(row[3][0], Link) and row[3][0].text == f"{(90 / 42 - 1) * 100:+.2f} % insns/iter"
    assert "disagree" in row[3][-1] and not any(w in row[3][0].text for w in ("faster", "slower"))


def test_a_runs_values_are_one_sample_and_carry_their_contention(tmp_path):
    """Through the real engine: a will-it-scale-like job emits several rates per run; the table
    holds one sample per run (their mean), each with the CPU share the engine measured, and an
    A/A control column sets the row's reach instead of being a variant."""
    import io

    from rich.console import Console

    from flagbench.run.engine import BenchCell, run_cells
    from flagbench.run.executors import NativeExecutor
    from flagbench.run.noise import aa_control

    busy = tmp_path / "busy.c"
    busy.write_text("int main(void) { volatile unsigned long s = 0; for (unsigned long i = 0; i < 20000000; i++) s += i; return 0; }\n")
    exe = tmp_path / "busy"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(busy)], check=True)
    executor = NativeExecutor(parse_stdout=False)
    rates = iter(range(1, 10_000))

    def timed(emit):
        m = executor.measure([str(exe)])
        for _ in range(3):                      # three "per-second" values a run, as wis emits
            emit("per_second", float(next(rates)), "iter/s")
        return m.failure

    cells = [BenchCell(bench="b", variant=v, target="x86_64", compiler="gcc", params={"tasks": n}, timed=timed,
                       samples=6, warmup=0, timed_metric="per_second", per_invocation=3)
             for n in ("1", "2") for v in ("A", "B")]
    cells += aa_control(cells, ["A", "B"])
    assert [c.variant for c in cells] == ["A", "B", "A", "B", "A@aa", "A@aa"]
    with Store(tmp_path / "fb.db") as s:
        out = run_cells(s, cells, experiment="e", experiment_hash="h", seed=3, progress=False,
                        console=Console(file=io.StringIO()))
        samples = s.samples(out.run_id)
    assert out.status == 0 and len(samples) == 2 * 3 * 6 * 3
    for sample in samples:
        c = sample["provenance"]["contention"]
        assert c["wall_s"] > 0 and c["cpu_s"] > 0 and 0 < c["cpu_share"] <= 1.2   # one single-threaded program
    [t] = build_tables(samples, ["A", "B"])
    assert t.variants == ["A", "B"] and t.measure.higher_is_better and not t.measure.exact
    assert len(t.rows) == 2
    row = t.rows[0]
    by_run = {}
    for sample in samples:
        if sample["params"] == {"tasks": "1"}:
            by_run.setdefault((sample["variant"], sample["provenance"]["sample"]), []).append(sample["value"])
    assert sorted(row.values["A"]) == sorted(sum(v) / 3 for (var, _), v in by_run.items() if var == "A")
    assert len(row.shares["B"]) == 6 and all(x is not None for x in row.shares["B"])
    assert row.control is not None and row.control.n_old == row.control.n_new == 6
    # each round visited a row's three columns back to back: a burst of load hits them alike
    order = [(sample["params"]["tasks"], sample["variant"]) for sample in samples][::3]
    triples = [order[i:i + 3] for i in range(0, len(order), 3)]
    assert all(len({n for n, _ in t3}) == 1 and sorted(v for _, v in t3) == ["A", "A@aa", "B"] for t3 in triples)


def test_kernel_summary_leads_with_bloat_o_meters_total():
    """A pair whose functions grew 3.84 % while .text hardly moved (zero call-used registers):
    one headline, bloat-o-meter's total, split into parts that add up to it (functions: its -t
    total; data: the rest); padding and the sections labelled as outside that total; no line
    wider than a mail's 100 columns."""
    from flagbench.size.summary import PairSummary, render
    s = PairSummary("default/x86_64/gcc", "zero/x86_64/gcc", text_old=4_194_560, text_new=4_198_914,
                padding_old=260_000, padding_new=110_000, covered_old=3_900_000, covered_new=4_053_600,
                bom_old=4_000_000, bom_new=4_153_621, fn_old=3_900_000, fn_new=4_053_600,
                rules="the tree's scripts/bloat-o-meter (older: weak symbols w/W/v/V not counted)",
                functions={"changed": 5862}, config_delta=[], objects=[], compiler="gcc 12", tree="debian:6.1",
                string_ops=[])
    text = render(s)
    lines = text.splitlines()
    assert lines[0] == "default/x86_64/gcc -> zero/x86_64/gcc"
    assert max(len(line) for line in lines) <= 100
    first = re.search(r"\(([+-][\d.]+) %\)", "\n".join(lines[1:])).group(1)
    assert first == f"{(4_153_621 / 4_000_000 - 1) * 100:+.2f}" and "5862 functions changed" in lines[1]
    m = re.match(r"size \+([\d ]+) B \(\+[\d.]+ %\) = functions \+([\d ]+) B \+ data \+([\d ]+) B;", lines[1])
    total, functions, data = (int(g.replace(" ", "")) for g in m.groups())
    assert total == 153_621 and functions == 153_600 and data == 21 and functions + data == total
    assert "Before=4000000, After=4153621" in lines[2]       # bloat-o-meter's own footer says the same total
    rest = " ".join(line.strip() for line in lines[3:])
    assert "not in that total: padding between functions -150 000 B" in rest
    assert "code sections 4194560 -> 4198914 B (+4 354, +0.10 %)" in rest and "grew into the alignment padding" in rest
    assert "bloat-o-meter rules: the tree's scripts/bloat-o-meter (older" in rest


def test_a_runs_notes_are_in_md_html_and_text_as_lines():
    """What a run said while it measured (a booted kernel's A/A noise floor, its kernel profile) is
    in every format, not only on stderr; a note of several lines stays lines (no literal \\n)."""
    samples = [dict(bench="pf", metric="ns_per_iter", unit="ns", variant=v, target="x86_64", compiler="gcc",
                    params={}, value=base + i) for v, base in (("A", 10.0), ("B", 20.0)) for i in range(6)]
    floor = "A/A noise floor, page_fault.processes.1: 13652.00 kernel instructions per iteration"
    profile = "kernel profile, page_fault.processes.1, instructions per iteration:\n  symbol  A  B\n  clear_page  1  2"
    run = {"id": 3, "experiment": "k", "experiment_hash": "0" * 12, "started": "2026-11-26T20:00:00+00:00",
           "provenance": {"cpu": "AMD EPYC 7B13 64-Core Processor", "notes": [floor, profile]}}
    tables = build_tables(samples, ["A", "B"])
    for fmt in ("md", "html", "text"):
        out = render(tables, fmt, run=run)
        assert "13652.00 kernel instructions per iteration" in out, fmt
        assert "\\n" not in out and "  clear_page  1  2" in out, fmt
        if fmt != "html":
            assert max(len(line) for line in out.splitlines()) <= 100, fmt
            assert any(line.startswith("run 3 · k") for line in out.splitlines())
            assert "AMD EPYC 7B13 64-Core Processor" in out        # the header is not broken in the CPU name
