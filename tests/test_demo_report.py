"""`flagbench demo` on a small case of its own: the report a maintainer pastes.

A summary first whose every link points at an anchor of the report; cells named
variant/target/compiler (no cache paths); "no symbol changed size" when nothing did; a chosen
function that did not change counted, not printed; and the html beside the md.
"""
from __future__ import annotations

import re
import sys
import textwrap

import pytest
from conftest import ROOT, flagbench_isolated as flagbench

LOOP_C = r"""
#include <stdint.h>
uint64_t spin(uint64_t n)
{
    uint64_t acc = 1;
    for (uint64_t i = 0; i < n; i++)
        acc = acc * 3 + i + EXTRA;
    return acc;
}
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    case = root / "cases" / "same"
    case.mkdir(parents=True)
    (case / "loop.c").write_text(LOOP_C)
    (case / "experiment.toml").write_text(textwrap.dedent("""
        description = "a define that changes nothing | <b>not bold</b>"
        sources = ["loop.c"]
        targets = ["x86_64"]
        compilers = ["gcc"]
        cflags = ["-O2"]
        show = ["spin"]

        [variants]
        base = { defines = { EXTRA = 0 } }
        same = { defines = { EXTRA = 0, UNUSED = 1 } }

        [[bench]]
        name = "spin"
        kind = "micro"
        function = "spin"
        metrics = ["insns"]
        """))
    series = root / "cases" / "series"             # the bundled series case: --full only
    series.mkdir()
    for name in ("series.toml", "make-repo"):
        (series / name).write_bytes((ROOT / "cases" / "series" / name).read_bytes())
    out = root / "out" / "demo.md"
    done = flagbench("demo", "--cases-dir", str(root / "cases"), "--db", str(root / "fb.db"), "--out", str(out),
                     cwd=root)
    assert done.returncode == 0, done.stderr
    return root, out.read_text(), out.with_suffix(".html"), done


def test_the_demo_report(demo):
    """One test over the one demo run (pytest-xdist would otherwise run it per worker)."""
    _summary_first_and_every_link_resolves(demo)
    _cells_are_named_not_paths_and_nothing_unchanged_is_printed(demo)
    _html_beside_md_and_stdout_ends_with_the_summary(demo)
    _every_output_fits_a_mail(demo)
    _the_series_case_is_named_for_full(demo)


def _the_series_case_is_named_for_full(demo):
    _, md, _, done = demo
    said = "not run: series (a kernel series, x86_64: flagbench demo --full)"
    assert said in md and said in done.stdout


def _summary_first_and_every_link_resolves(demo):
    _, md, _, _ = demo
    assert md.index("## Summary") < md.index("## same")
    summary = md[md.index("## Summary"):md.index("## same")]
    links = re.findall(r"\]\(#([a-z0-9-]+)\)", summary)
    assert links and "+0.00 % insns/iter" in summary
    anchors = set(re.findall(r'<a id="([a-z0-9-]+)"></a>', md))
    assert set(links) <= anchors


def _cells_are_named_not_paths_and_nothing_unchanged_is_printed(demo):
    root, md, _, _ = demo
    assert "same/x86_64/gcc vs base/x86_64/gcc" in md
    assert str(root) not in md and ".cache" not in md and "/cells/" not in md
    assert "no symbol changed size" in md
    assert "the same in both builds (not printed): spin" in md
    # the one code block: the verdict's cause, as `run` prints it under the table
    blocks = re.findall(r"```\n(.*?)```", md, re.S)
    assert len(blocks) == 1 and blocks[0].startswith(
        "cause: layout: no changed code ran; counts the same: not a regression\nA/A floor 0: "), blocks
    assert "\\<b>not bold\\</b>" in md and not re.search(r"(?<!\\)<b>", md) and "&lt;" not in md


def _html_beside_md_and_stdout_ends_with_the_summary(demo):
    _, _, html, done = demo
    page = html.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page and 'id="summary"' in page
    assert "&lt;b&gt;not bold&lt;/b&gt;" in page
    assert "cause: layout: no changed code ran; counts the same: not a regression" in page
    printed = done.stdout   # the one-screen summary and where the full report is, not the report
    assert printed.startswith("Summary\n") and "## " not in printed and "](#" not in printed
    assert "same/x86_64/gcc vs base/x86_64/gcc" not in printed     # the case's section is in the files only
    assert len(printed.splitlines()) < 40 and printed.rstrip().splitlines()[-2].startswith("full report: ")


def _every_output_fits_a_mail(demo):
    """What a reviewer pastes into a reply read at 72-100 columns: the demo's summary and report,
    `flagbench report` of the case and of the stored run, in text and md: no line over 100
    columns, no HTML entity, no newline printed as a literal backslash-n."""
    root, md, _, done = demo
    case = root / "cases" / "same"
    outputs = {"demo md": md, "demo stdout": done.stdout}
    for fmt in ("text", "md"):
        for what, args in (("case", [str(case)]), ("run", [])):
            page = flagbench("report", *args, "--db", str(root / "fb.db"), "--format", fmt, cwd=root)
            assert page.returncode == 0, page.stderr
            outputs[f"report {what} {fmt}"] = page.stdout
    for name, text in outputs.items():
        widest = max(text.splitlines(), key=len)
        assert len(widest) <= 100, (name, widest)
        assert "&lt;" not in text and "&gt;" not in text and "&amp;" not in text, name
        assert "\\n" not in text, name
    assert "size: bloat-o-meter's total over the whole build" in md


def test_cases_come_in_seed_order(tmp_path):
    from flagbench.cli.demo import seed_order
    for name, seed in (("b-case", 3), ("a-case", 4), ("kernel-x", 0), ("c-case", 0)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "experiment.toml").write_text(f"# Seed {seed:03d}: a thread\n")
    order = sorted((p.parent for p in tmp_path.glob("*/experiment.toml")), key=seed_order)
    assert [p.name for p in order] == ["c-case", "b-case", "a-case", "kernel-x"]


def test_progress_lines_from_threads_are_written_whole(monkeypatch):
    """Build progress comes from compiler threads: each line must reach stderr in one write, or two
    threads interleave ("...crc.cflagbench run: cc ...")."""
    import threading

    from flagbench.textsafe import sayer

    class Recorder:
        def __init__(self):
            self.writes = []

        def write(self, text):
            self.writes.append(text)

        def flush(self):
            pass

    recorder = Recorder()
    monkeypatch.setattr(sys, "stderr", recorder)
    say = sayer("flagbench demo: case: ")
    threads = [threading.Thread(target=lambda n=n: [say(f"cc worker {n} file {i}.c") for i in range(200)])
               for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(recorder.writes) == 8 * 200
    assert all(re.fullmatch(r"flagbench demo: case: cc worker \d file \d+\.c\n", w) for w in recorder.writes)


def test_report_gives_any_experiment_the_demo_page(demo):
    """`flagbench report EXPERIMENT` writes the page the demo wrote for that case, from one command."""
    root, md, _, _ = demo
    case = root / "cases" / "same"
    page = flagbench("report", str(case), "--db", str(root / "fb.db"), "--format", "md", cwd=root)
    assert page.returncode == 0, page.stderr
    assert "same/x86_64/gcc vs base/x86_64/gcc" in page.stdout and "no symbol changed size" in page.stdout
    assert page.stdout.strip() == md[md.index('<a id="same"></a>'):].strip()
    text = flagbench("report", str(case), "--db", str(root / "fb.db"), "--format", "text", cwd=root)
    assert text.returncode == 0 and "](#" not in text.stdout and "same/x86_64/gcc vs base/x86_64/gcc" in text.stdout
    bad = flagbench("report", str(case), "--db", str(root / "fb.db"), "--format", "csv", cwd=root)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("tty", [False, True])
def test_build_progress_is_one_line_not_one_per_object(tty):
    """The demo's C builds: 49 objects are one line rewritten in place on a terminal (none in a
    log), the other progress lines as they come."""
    import io

    from flagbench.cli.demo import OneLine

    class Stream(io.StringIO):
        def isatty(self):
            return tty

    said, stream = [], Stream()
    with OneLine(said.append, stream) as progress:
        progress("4 cells, 49 objects, 2 workers")
        for i in range(49):
            progress(f"cc v/x86_64/gcc file{i}.c")
    progress("after the build")
    assert said == ["4 cells, 49 objects, 2 workers", "after the build"]
    out = stream.getvalue()
    if tty:
        assert out.count("\r") == 49 and out.count("\n") == 1 and "cc 49/49: v/x86_64/gcc file48.c" in out
    else:
        assert out == ""
