"""Series as they arrive by mail (flagbench.mail, `series --mbox`, `check`), on git repositories
the tests make and mbox files `git format-patch --cover-letter --base` writes from them; real
git (am, range-diff) and gcc. The oracle for sizes is the kernel's scripts/bloat-o-meter run on
the files each row was built into; the user's repository must come out as it went in.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CACHE_ENV, ROOT, flagbench, write_experiment
from test_series import EXPERIMENT, GIT_ENV, LOOP_C, repo_state
from test_size import oracle

AUTHOR = {"GIT_AUTHOR_NAME": "Zoë Åuthor", "GIT_AUTHOR_EMAIL": "zoe@example.org"}
BUDGETS = '[check]\nsize = "+1%"\ncounts = "+2%"\ntime = "+3%"\n'
HELPER = ("\treturn x * 3 + 1;", "\tif (x > 100)\n\t\treturn x / 7 + x % 5;\n\treturn x * 3 + 1;")
XOR = ("\t\tacc += i;\n", "\t\tacc += i;\n\t\tacc ^= i;\n")
XOR2 = ("\t\tacc += i;\n", "\t\tacc += i;\n\t\tacc ^= i;\n\t\tacc += 2;\n")
COMMENT = ("/* sum: a loop */", "/* sum_loop: adds 0..n-1 */")
THIRD = ("int helper(int x)", "int third(int x)\n{\n\treturn x + 1;\n}\n\nint helper(int x)")
# v1: helper, comment, xor; v2: helper (the same diff), xor (another diff), third (new); the
# comment patch dropped
V1 = [("helper: a second case", HELPER), ("loop: reword the comment", COMMENT), ("loop: xor each step", XOR)]
V2 = [("helper: a second case", HELPER), ("loop: xor each step", XOR2), ("third: a new helper", THIRD)]
COVER = "sum: faster loops for Zoë"


def git(repo: Path, *args: str, env: dict | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV, **(env or {})}).stdout


def commit_edits(repo: Path, edits) -> None:
    source = repo / "exp" / "loop.c"
    for subject, (old, new) in edits:
        text = source.read_text()
        assert old in text, subject
        source.write_text(text.replace(old, new, 1))
        git(repo, "commit", "-q", "-a", "-m", subject, env=AUTHOR)


def format_patch(repo: Path, branch: str, out: Path, *extra: str) -> Path:
    """`git format-patch --cover-letter --base=base` of base..BRANCH as one mbox, the cover's
    subject written in (format-patch leaves *** SUBJECT HERE *** for the author)."""
    text = git(repo, "format-patch", "--stdout", "--cover-letter", "--base=base", *extra, f"base..{branch}")
    text = text.replace("*** SUBJECT HERE ***", "=?UTF-8?q?sum=3A_faster_loops_for_Zo=C3=AB?=")
    out.write_text(text)
    return out


def mails(mbox: Path) -> list[str]:
    return re.split(r"(?m)^(?=From [0-9a-f]{40} )", mbox.read_text())[1:]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """base (tag), then branches v1, v2 (the series' two versions) and gap (the v1 series with
    an unsent commit between the helper and the comment: its next patch will not apply)."""
    repo = tmp_path_factory.mktemp("mail") / "repo"
    write_experiment(repo / "exp", EXPERIMENT + BUDGETS, {"loop.c": LOOP_C})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    for branch, edits in (("v1", V1), ("v2", V2)):
        git(repo, "checkout", "-q", "-b", branch, "base")
        commit_edits(repo, edits)
    git(repo, "checkout", "-q", "-b", "gap", "base")
    commit_edits(repo, [V1[0], ("unsent: the comment moves", ("/* sum: a loop */", "/* sum: one loop */")),
                        ("loop: reword the comment", ("/* sum: one loop */", "/* sum_loop: adds */")), V1[2]])
    git(repo, "checkout", "-q", "main")
    (repo / "exp" / "loop.c").write_text(LOOP_C + "/* uncommitted */\n")
    return repo


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.getbasetemp() / "mail-cache"


@pytest.fixture(scope="module")
def boxes(repo, tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("boxes")
    v1 = format_patch(repo, "v1", out / "v1.mbx")
    v2 = format_patch(repo, "v2", out / "v2.mbx", "-v2")
    # v1 as a list delivers it: out of order, one patch twice, a reply between them
    cover, p1, p2, p3 = mails(v1)
    reply = p1.replace("Subject: [PATCH 1/3]", "Subject: Re: [PATCH 1/3]", 1)
    shuffled = out / "v1-shuffled.mbx"
    shuffled.write_text(cover + p3 + p1 + reply + p2 + p3)
    gap = format_patch(repo, "gap", out / "gap-all.mbx")
    cover, a, unsent, b, c = mails(gap)
    assert "unsent" in unsent
    (out / "gap.mbx").write_text(cover + a + b + c)
    return {"v1": v1, "v2": v2, "shuffled": shuffled, "gap": out / "gap.mbx"}


def series(exp: Path, *args, cache: Path) -> subprocess.CompletedProcess:
    """`flagbench series EXP ARGS`, its results database beside the cache."""
    return flagbench("series", exp, *args, "--db", cache.parent / "mail.db", cache=cache)


def flagbench_in(*args, input: str, cache: Path) -> subprocess.CompletedProcess:
    """`flagbench ARGS` with INPUT on stdin (as b4 runs a check command)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), CACHE_ENV: str(cache)}
    return subprocess.run([sys.executable, "-m", "flagbench", *map(str, args)], input=input, capture_output=True,
                          text=True, env=env, timeout=900)


def total_of(bom: str) -> int:
    return int(re.search(r"up/down: \S+ \(([-+]?\d+)\)", bom).group(1))


def test_an_mbox_is_a_series_of_rows_with_subjects_and_authors(repo, boxes, cache, tmp_path):
    before = repo_state(repo)
    done = series(repo / "exp", "--mbox", boxes["shuffled"], "--format", "json", cache=cache)
    assert done.returncode == 0, done.stderr
    assert repo_state(repo) == before                            # nothing of the user's touched
    data = json.loads(done.stdout)
    rows = data["rows"]
    assert data["mail"]["name"] == COVER and data["mail"]["version"] == 1
    assert data["mail"]["base_commit"] == git(repo, "rev-parse", "base").strip()
    assert rows[0]["sha"] == data["mail"]["base_commit"]
    assert [r["subject"] for r in rows[1:]] == [s for s, _ in V1]
    assert [r["patch"] for r in rows[1:]] == ["[PATCH 1/3]", "[PATCH 2/3]", "[PATCH 3/3]"]
    assert {r["author"] for r in rows[1:]} == {"Zoë Åuthor <zoe@example.org>"}
    # the commits git am made have the trees the author's commits have
    assert [r["tree"] for r in rows[1:]] == [git(repo, "rev-parse", f"v1~{n}^{{tree}}").strip() for n in (2, 1, 0)]
    notes = " ".join(data["notes"])
    assert "a reply" in notes and "a duplicate of [PATCH 3/3]" in notes and "out of order" in notes
    for r in rows[1:]:
        older = next(o for o in rows if o["short"] == r["compared_with"])
        assert r["vs_parent"]["total"] == total_of(oracle(tmp_path, older["size_file"], r["size_file"], current=True))
    helper, comment, xor = rows[1:]
    assert helper["vs_parent"]["functions"] == ["helper"] and helper["vs_parent"]["total"] > 0
    assert comment["vs_parent"]["total"] == 0 and comment["vs_parent"]["changed"] == 0
    assert xor["vs_parent"]["functions"] == ["sum_loop"]
    assert xor["vs_parent"]["counts"]["sum insns_per_iter"] > 0
    assert helper["vs_parent"]["counts"]["sum insns_per_iter"] == 0
    clone = Path(data["mail"]["clone"])
    assert clone.is_relative_to(cache) and not clone.is_relative_to(repo.parent)
    text = series(repo / "exp", "--mbox", boxes["v1"], cache=cache)
    assert text.returncode == 0, text.stderr
    assert all(len(line) <= 100 for line in text.stdout.splitlines()), text.stdout
    # the same patches onto the same base are the same commits (their dates the mails'): stored
    assert "every commit is stored" in text.stderr, text.stderr
    md = series(repo / "exp", "--mbox", boxes["v1"], "--format", "md", cache=cache).stdout
    assert md.startswith("```\n") and "  helper: a second case  " in md and "patches by Zoë Åuthor" in md


def test_a_patch_that_does_not_apply_is_a_row_and_the_next_is_compared_with_the_last_applied(repo, boxes, cache):
    done = series(repo / "exp", "--mbox", boxes["gap"], "--format", "json", cache=cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    base, helper, comment, xor = data["rows"]
    assert not comment["built"] and comment["applied"] is False
    assert comment["error"] == "does not apply: exp/loop.c hunk #1 (1 rejected)"
    assert xor["applied"] and xor["compared_with"] == helper["short"]
    assert any("patch(es) 2 of 4 missing" in n for n in data["notes"])
    text = series(repo / "exp", "--mbox", boxes["gap"], "--no-counts", cache=cache).stdout
    assert "does not apply: exp/loop.c hunk #1" in text
    assert f"(compared with {helper['short']}, its first parent)" in text   # the last that applied


def test_v1_against_v2_pairs_patches_as_range_diff_does(repo, boxes, cache):
    done = series(repo / "exp", "--mbox", boxes["v1"], "--mbox", boxes["v2"], "--format", "json",
                     cache=cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    pairs = {p["subject"]: p for p in data["pairs"]}
    assert set(pairs) == {"helper: a second case", "loop: xor each step"}
    helper, xor = pairs["helper: a second case"], pairs["loop: xor each step"]
    assert (helper["v1"], helper["v2"], helper["range_diff"]) == ("[PATCH 1/3]", "[PATCH v2 1/3]", "=")
    assert (xor["v1"], xor["v2"], xor["range_diff"]) == ("[PATCH 3/3]", "[PATCH v2 2/3]", "!")
    assert helper["v1_evidence"] == helper["v2_evidence"]             # one diff, one effect
    one, two = xor["v1_evidence"], xor["v2_evidence"]
    assert two["size"] > one["size"] and two["count sum insns_per_iter"] > one["count sum insns_per_iter"]
    assert data["dropped"] == ["[PATCH 2/3]"] and data["added"] == ["[PATCH v2 3/3]"]
    v2_rows = data["versions"][1]["rows"]
    assert v2_rows[1]["cached"]                                       # v1's helper tree: not built again
    md = series(repo / "exp", "--mbox", boxes["v1"], "--mbox", boxes["v2"], cache=cache).stdout
    assert all(len(line) <= 100 for line in md.splitlines()), md
    assert "#### [PATCH v2 2/3] loop: xor each step" in md and "range-diff: ! (diff changed)" in md
    assert "#### patches added in v2" in md and "third: a new helper" in md
    assert re.search(r"\| size, bytes +\| +\+\d+ \| +\+\d+ \| +\+\d+ \|", md), md


def b4_shape(out: str) -> list[dict]:
    """b4's check command output as b4 documents and reads it: a list of {tool, status
    pass|warn|fail, summary, url, details}, all strings; our details: a JSON list of findings."""
    data = json.loads(out)
    assert isinstance(data, list) and data
    for entry in data:
        assert set(entry) == {"tool", "status", "summary", "url", "details"}
        assert all(isinstance(v, str) for v in entry.values())
        assert entry["status"] in ("pass", "warn", "fail")
        assert "\n" not in entry["summary"] and len(entry["summary"]) <= 160
        for finding in json.loads(entry["details"]):
            assert set(finding) == {"status", "description"} and finding["status"] in ("pass", "warn", "fail")
    return data


def test_check_prints_b4s_json_and_patchworks_check(repo, boxes, cache, tmp_path):
    # the comment patch alone, onto its parent: no byte and no count moves, within every budget
    cover, helper, comment, xor = mails(boxes["v1"])
    done = subprocess.run(["git", "-C", str(repo), "rev-parse", "v1~2"], capture_output=True, text=True)
    run = flagbench_in("check", repo / "exp", "--base", done.stdout.strip(), "-q", cache=cache, input=comment)
    assert run.returncode == 0, run.stderr
    (entry,) = b4_shape(run.stdout)
    assert entry["status"] == "pass" and entry["tool"] == "flagbench"
    quiet = flagbench_in("check", repo / "exp", "--base", done.stdout.strip(), "-q", "--format", "checkpatch",
                         cache=cache, input=comment)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")      # b4: "passed all checks"
    assert entry["summary"].startswith("size +0 B (+0.00%, budget +1%)")
    details = json.loads(entry["details"])
    assert any("time (budget +3%): not measured" in d["description"] for d in details)
    # the whole v2 series from its mbox: over the size and counts budgets
    run = flagbench_in("check", repo / "exp", "-q", cache=cache, input=boxes["v2"].read_text())
    assert run.returncode == 1, run.stderr
    (entry,) = b4_shape(run.stdout)
    assert entry["status"] == "fail"
    descriptions = [d["description"] for d in json.loads(entry["details"])]
    assert any(d.startswith("function helper +") for d in descriptions)
    (count,) = [d for d in json.loads(entry["details"]) if d["description"].startswith("sum insns_per_iter +")]
    assert count["status"] == "fail" and "budget +2%" in count["description"]
    pw = flagbench_in("check", repo / "exp", "-q", "--format", "patchwork", "--url", "https://ci.example.org/1",
                      cache=cache, input=boxes["v2"].read_text())
    check = json.loads(pw.stdout)
    assert check == {"state": "fail", "context": "flagbench-exp", "description": entry["summary"],
                     "target_url": "https://ci.example.org/1"}
    # as lines for b4 am/prep --check: one ERROR: line per failure, the summary first
    lines = flagbench_in("check", repo / "exp", "-q", "--format", "checkpatch", cache=cache,
                         input=boxes["v2"].read_text())
    assert lines.returncode == 1 and lines.stderr == ""
    assert lines.stdout.splitlines()[0] == f"ERROR: flagbench: {entry['summary']}"
    said = lines.stdout.splitlines()
    assert len(said) == 3 and all(x.startswith("ERROR: flagbench: ") for x in said)   # the size and the count
    # b4's per-series check hands over the cover letter alone: nothing to measure, said so
    run = flagbench_in("check", repo / "exp", "-q", cache=cache, input=mails(boxes["v2"])[0])
    assert run.returncode == 0, run.stderr
    (entry,) = b4_shape(run.stdout)
    assert entry["status"] == "pass" and entry["summary"].startswith("a cover letter: nothing to measure")
    pending = flagbench_in("check", repo / "exp", "--format", "patchwork", "--pending", cache=cache, input="")
    assert json.loads(pending.stdout) == {"state": "pending", "context": "flagbench-exp",
                                          "description": "flagbench is measuring", "target_url": ""}
    # v2's 2/3 alone onto v1 (as b4 hands one patch of a series): does not apply, a warning
    run = flagbench_in("check", repo / "exp", "--base", "v1", "-q", cache=cache, input=mails(boxes["v2"])[2])
    assert run.returncode == 0, run.stderr
    (entry,) = b4_shape(run.stdout)
    assert entry["status"] == "warn" and "does not apply: exp/loop.c hunk #1" in entry["summary"]


# -- untrusted mail ----------------------------------------------------------------------------
EVIL = """\
From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Mallory <m@example.org>
Subject: [PATCH] {subject}

---
diff --git a/{path} b/{path}
new file mode 100644
--- /dev/null
+++ b/{path}
@@ -0,0 +1 @@
+owned
"""


def one_line_exit_2(done) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    return done.stderr


@pytest.mark.parametrize("path", ["../evil", "exp/../../evil", "/tmp/evil", ".git/hooks/post-commit"])
def test_a_path_outside_the_tree_is_refused_and_nothing_written(repo, tmp_path, path):
    mbox = tmp_path / "evil.mbx"
    mbox.write_text(EVIL.format(subject="helpful", path=path))
    before = repo_state(repo)
    said = one_line_exit_2(series(repo / "exp", "--mbox", mbox, cache=tmp_path / "cache"))
    assert "outside the tree: refused" in said
    assert not list((tmp_path / "cache").glob("mail/*/work"))        # refused before any clone
    assert not list((tmp_path / "cache").glob("mail/mbox-*"))        # the mbox's copy gone
    assert not (repo.parent / "evil").exists() and repo_state(repo) == before
    one_line_exit_2(flagbench_in("check", repo / "exp", cache=tmp_path / "cache", input=mbox.read_text()))


def test_a_symbolic_link_in_a_patch_is_refused(repo, tmp_path):
    link = EVIL.format(subject="a link", path="exp/loop.c").replace(
        "new file mode 100644", "new file mode 120000").replace("+owned", "+/etc/passwd")
    mbox = tmp_path / "link.mbx"
    mbox.write_text(link)
    said = one_line_exit_2(series(repo / "exp", "--mbox", mbox, cache=tmp_path / "cache"))
    assert "a symbolic link in the patch: refused" in said


def test_malformed_huge_and_binary_input(repo, tmp_path, cache):
    garbage = tmp_path / "garbage.mbx"
    garbage.write_bytes(b"From nobody\n\x00\x01\x02 not mail")
    assert "binary data, not mail" in one_line_exit_2(series(repo / "exp", "--mbox", garbage, cache=tmp_path / "cache"))
    garbage.write_text("From nobody Mon Sep 17 00:00:00 2001\nthis is not a patch\n\nnor is this\n")
    assert "no patch in 1 mail" in one_line_exit_2(series(repo / "exp", "--mbox", garbage, cache=tmp_path / "cache"))
    huge = tmp_path / "huge.mbx"
    with huge.open("wb") as f:                                      # 100 MB, sparse: refused unread
        f.write(EVIL.format(subject="big", path="exp/big.c").encode())
        f.truncate(100 * 2**20)
    assert "more than 32 MB of mail" in one_line_exit_2(series(repo / "exp", "--mbox", huge, cache=tmp_path / "cache"))
    said = one_line_exit_2(flagbench_in("check", repo / "exp", input="x" * (33 * 2**20), cache=tmp_path / "cache"))
    assert "stdin: more than 32 MB of mail" in said
    missing = series(repo / "exp", "--mbox", tmp_path / "none", cache=tmp_path / "cache")
    assert "No such file or directory" in one_line_exit_2(missing)
    assert "not a maildir" in one_line_exit_2(series(repo / "exp", "--mbox", tmp_path, cache=tmp_path / "cache"))
    # a binary patch is a row that says so; the text patch after it applies
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    (work / "exp" / "blob.bin").write_bytes(bytes(range(256)))
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "blob: a table", env=AUTHOR)
    commit_edits(work, [V1[0]])
    binary = tmp_path / "binary.mbx"
    binary.write_text(git(work, "format-patch", "--stdout", "--binary", "--base=base", "base..HEAD"))
    done = series(repo / "exp", "--mbox", binary, "--format", "json", "--no-counts", cache=cache)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert rows[1]["error"] == "does not apply: a binary patch (flagbench applies text only)"
    assert rows[2]["built"] and rows[2]["vs_parent"]["functions"] == ["helper"]


def test_odd_header_encodings_are_decoded_and_made_safe(repo, boxes, tmp_path, cache):
    cover, helper, comment, xor = mails(boxes["v1"])
    odd = helper.replace("Subject: [PATCH 1/3] helper: a second case",
                         "Subject: [PATCH 1/3] =?utf-8?q?helper?= =?utf-8?q?=1B[31mred=1B[0m?=")
    odd = re.sub(r"(?m)^From: .*$", "From: =?iso-8859-1?q?J=F6rg?= <j@example.org>", odd, count=1)
    unknown = xor.replace("Subject: [PATCH 3/3] loop: xor each step",
                          "Subject: [PATCH 3/3] =?x-no-such-charset?q?loop=3A_xor?= each step")
    raw = comment.replace("Subject: [PATCH 2/3] loop: reword the comment",
                          "Subject: [PATCH 2/3] loop: reword the comment, Grüße")    # 8-bit, unencoded
    mbox = tmp_path / "odd.mbx"
    mbox.write_text(cover + odd + raw + unknown)
    done = series(repo / "exp", "--mbox", mbox, "--no-counts", "--format", "md", cache=cache)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert "  helper\\x1b[31mred\\x1b[0m  " in done.stdout, done.stdout
    assert "  loop: reword the comment, Grüße  " in done.stdout and "Jörg" in done.stdout
    # a word in a charset nobody knows: read as UTF-8 here; git am refuses the mail: a row says so
    row = r"  loop: xor each step +(does not apply: .+|\+\d+ )"
    assert re.search(row, done.stdout), done.stdout


def test_check_budgets_are_checked_when_loaded(repo, tmp_path):
    exp = write_experiment(tmp_path / "exp", 'sources = ["a.c"]\n[variants]\na = {}\n[check]\nsize = "lots"\n')
    done = flagbench("build", exp, cache=tmp_path / "cache")
    said = one_line_exit_2(done)
    assert f"{exp / 'experiment.toml'}:5:" in said and 'a growth budget like "+1%"' in said


def test_subject_prefixes_give_version_and_order():
    from flagbench.mail.parse import _prefix

    assert _prefix("[RFC PATCH net-next v3 02/10] net: a change") == (True, 3, 2, 10, "net: a change")
    assert _prefix("[PATCH] one") == (True, 1, None, None, "one")
    assert _prefix("[PATCH v2 0/5] the series") == (True, 2, 0, 5, "the series")
    assert _prefix("[net,v2,1/2] comma-separated") == (False, 2, 1, 2, "comma-separated")
    assert _prefix("a plain subject") == (False, 1, None, None, "a plain subject")


def test_mixed_versions_keep_the_newest(boxes):
    from flagbench.mail.parse import series_of

    one, two = mails(boxes["v1"]), mails(boxes["v2"])
    got = series_of("mixed", [m.encode() for m in (two[2], one[1], two[0], two[1], one[3], two[3])])
    assert got.version == 2 and got.name == COVER and got.cover is not None
    assert [p.label for p in got.patches] == ["[PATCH v2 1/3]", "[PATCH v2 2/3]", "[PATCH v2 3/3]"]
    assert any("2 patch(es) of other versions than v2 ignored" in n for n in got.notes)
    assert got.base_commit is not None and len(got.base_commit) == 40


def test_a_maildir_is_a_series_and_holds_mails_only(repo, boxes, cache, tmp_path):
    box = tmp_path / "box"
    for sub in ("cur", "new", "tmp"):
        (box / sub).mkdir(parents=True)
    for i, mail in enumerate(reversed(mails(boxes["v1"]))):     # delivered in any order
        (box / "cur" / f"{1000 + i}.mail{i}:2,S").write_text(mail.split("\n", 1)[1])   # no From_ line
    done = series(repo / "exp", "--mbox", box, "--format", "json", "--no-counts", cache=cache)
    assert done.returncode == 0, done.stderr
    assert [r["subject"] for r in json.loads(done.stdout)["rows"][1:]] == [s for s, _ in V1]
    (box / "new" / "zero").symlink_to("/dev/zero")
    said = one_line_exit_2(series(repo / "exp", "--mbox", box, cache=cache))
    assert "not a regular file: a maildir holds mails only" in said


def test_stdin_is_a_series_too(repo, boxes, cache):
    done = flagbench_in("series", repo / "exp", "--mbox", "-", "--no-counts", "--format", "json",
                        "--db", cache.parent / "mail.db", input=boxes["v2"].read_text(), cache=cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["mail"]["source"] == "-" and data["mail"]["version"] == 2
    assert [r["subject"] for r in data["rows"][1:]] == [s for s, _ in V2]
    said = one_line_exit_2(series(repo / "exp", "--mbox", "-", "--mbox", "-", cache=cache))
    assert "stdin can be read once" in said


def test_v1_against_v2_in_a_format_it_has_not_is_refused_before_measuring(repo, boxes, tmp_path):
    """v1 against v2 is text, md or json: --format html (a single series' format) is one line and
    exit 2 before anything is built, where it printed the Markdown."""
    cache = tmp_path / "cache"
    said = one_line_exit_2(series(repo / "exp", "--mbox", boxes["v1"], "--mbox", boxes["v2"], "--format", "html",
                                  cache=cache))
    assert "--format html: v1 against v2 is written as text, md, json" in said
    assert not cache.exists() or not any(cache.rglob("*.o"))


def test_a_base_commit_the_repository_lacks_needs_base(repo, boxes, cache):
    text = boxes["v1"].read_text()
    real = git(repo, "rev-parse", "base").strip()
    elsewhere = text.replace(f"base-commit: {real}", "base-commit: " + "1234567890" * 4)
    said = one_line_exit_2(flagbench_in("series", repo / "exp", "--mbox", "-", "--db", cache.parent / "mail.db",
                                        input=elsewhere, cache=cache))
    assert "base-commit 123456789012 (from the mails) is not in" in said and "--base REF" in said
    done = flagbench_in("series", repo / "exp", "--mbox", "-", "--base", "base", "--no-counts", "--format", "json",
                        "--db", cache.parent / "mail.db", input=elsewhere, cache=cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["rows"][0]["sha"] == real and data["rows"][1]["built"]
    assert any("is not in the repository" in n for n in data["notes"])


def test_check_fails_a_patch_that_does_not_build(repo, tmp_path, cache):
    work = tmp_path / "work"
    git(tmp_path, "clone", "-q", str(repo), str(work))
    commit_edits(work, [("loop: broken", ("\t\tacc += i;\n", "\t\tacc += i\n"))])
    patch = git(work, "format-patch", "--stdout", "--base=base", "base..HEAD")
    run = flagbench_in("check", repo / "exp", "-q", cache=cache, input=patch)
    assert run.returncode == 1, run.stderr
    (entry,) = b4_shape(run.stdout)
    assert entry["status"] == "fail"
    assert entry["summary"].startswith("[PATCH] does not build: ") and "expected ';'" in entry["summary"]


def test_a_kernel_tree_from_its_mbox_walks_the_applied_commits(tmp_path):
    """A kernel experiment takes the same path without a kernel build: a tree with a Makefile and
    Kconfig that configures nothing. Each applied commit is walked out of the clone flagbench
    owns into kbuild's checkout, and make's failure is the row's."""
    linux = tmp_path / "linux"
    (linux / "lib").mkdir(parents=True)
    (linux / "Makefile").write_text("VERSION = 6\nPATCHLEVEL = 1\n\n%:\n\t@echo no $@ in this tree >&2; exit 2\n")
    (linux / "Kconfig").write_text('mainmenu "not a kernel"\n')
    (linux / "lib" / "a.c").write_text("int x;\n")
    git(linux, "init", "-q", "-b", "main")
    git(linux, "add", ".")
    git(linux, "commit", "-q", "-m", "base")
    git(linux, "tag", "base")
    (linux / "lib" / "a.c").write_text("int x;\nint y;\n")
    git(linux, "commit", "-q", "-a", "-m", "lib: y", env=AUTHOR)
    mbox = tmp_path / "k.mbx"
    mbox.write_text(git(linux, "format-patch", "--stdout", "--cover-letter", "--base=base", "base..main"))
    git(linux, "reset", "-q", "--hard", "base")                     # the series is in the mail only
    write_experiment(tmp_path / "exp", '[kernel]\nsource = "../linux"\n[variants]\ndefault = {}\n', {})
    before = repo_state(linux)
    done = series(tmp_path / "exp", "--mbox", mbox, "--format", "json", cache=tmp_path / "cache")
    assert repo_state(linux) == before
    assert done.returncode == 1, done.stderr                        # nothing built: the tree is no kernel
    rows = json.loads(done.stdout)["rows"]
    assert [r["subject"] for r in rows] == ["base", "lib: y"] and rows[1]["applied"]
    assert all("no tinyconfig in this tree" in r["error"] for r in rows), rows
    walked = list((tmp_path / "cache" / "kernel" / "trees").glob("git-*/src/lib/a.c"))
    assert [w.read_text() for w in walked] == ["int x;\nint y;\n"]  # the applied commit, last walked
