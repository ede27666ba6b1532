"""`flagbench series EXP --mbox v1 --mbox v2 --host H`: each version's patches timed against the
one before them in paired rounds on a real OpenSSH server on 127.0.0.1 (tests/sshd_util.py), the
exact counts taken here, and one table per patch pairing v1's evidence with v2's."""
from __future__ import annotations

import json
from collections import defaultdict

from conftest import flagbench, write_experiment
from flagbench.store import Store
from sshd_util import sshd_server
from test_series_timed import EXPERIMENT, SPIN_C, git


def test_v1_against_v2_timed_on_a_host_in_paired_rounds(tmp_path):
    repo = tmp_path / "repo"
    # six pairs: the fewest with an interval (stats/ranks.py MIN_SAMPLES_CI)
    write_experiment(repo, EXPERIMENT.replace("samples = 4", "samples = 6"), {"spin.c": SPIN_C.replace("WORK", "1")})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    for branch, nops in (("v1", "9"), ("v2", "5")):      # v1: eight nops more an iteration; v2: four
        git(repo, "checkout", "-q", "-b", branch, "base")
        (repo / "spin.c").write_text(SPIN_C.replace("WORK", nops))
        git(repo, "commit", "-q", "-a", "-m", "spin: more nops")
        (repo / "spin.c").write_text(SPIN_C.replace("WORK", nops) + "/* a comment */\n")   # nothing it runs
        git(repo, "commit", "-q", "-a", "-m", "spin: a comment")
    git(repo, "checkout", "-q", "main")
    boxes = {}
    for version in ("v1", "v2"):
        boxes[version] = tmp_path / f"{version}.mbx"
        extra = ["-v2"] if version == "v2" else []
        text = git(repo, "format-patch", "--stdout", "--cover-letter", "--base=base", *extra, f"base..{version}")
        boxes[version].write_text(text.replace("*** SUBJECT HERE ***", "spin: more work") + "\n")
    db = tmp_path / "fb.db"
    with sshd_server(tmp_path / "box", alias="box") as box:
        done = flagbench("series", repo, "--mbox", boxes["v1"], "--mbox", boxes["v2"], "--host", "box",
                         "--db", db, "--format", "json", env={"FLAGBENCH_SSH": box.ssh_env}, cache=tmp_path / "cache",
                         timeout=900)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        md = flagbench("series", repo, "--mbox", boxes["v1"], "--mbox", boxes["v2"], "--host", "box",
                       "--db", db, env={"FLAGBENCH_SSH": box.ssh_env}, cache=tmp_path / "cache", timeout=900)
    assert md.returncode == 0, md.stderr
    print(md.stdout)      # docs/mail.md shows it
    assert [p["range_diff"] for p in data["pairs"]] == ["!", "="]
    more, comment = data["pairs"]
    # exact counts: eight and four nops more an iteration; the comment moves nothing
    assert more["v1_evidence"]["count spin insns_per_iter"] == 8
    assert more["v2_evidence"]["count spin insns_per_iter"] == 4
    assert comment["v1_evidence"]["count spin insns_per_iter"] == 0
    for pair in data["pairs"]:
        for version in ("v1_evidence", "v2_evidence"):
            t = pair[version]["time spin ns_per_iter"]
            assert t["pairs"] == 6 and t["ratio"] > 0
            if t["low"] is not None:     # (none when contention left fewer than six pairs)
                assert t["low"] <= t["ratio"] <= t["high"]
    # in the store: each patch and the one before it, round by round, on the box
    with Store(db, create=False) as store:
        runs = store.runs()
        timed = [s for r in runs for s in store.samples(r["id"]) if s["provenance"].get("job") == "sample"]
    rounds = defaultdict(set)
    for s in timed:
        assert s["provenance"]["host"] == "box"
        rounds[(s["params"]["pair"], s["provenance"]["round"])].add(s["variant"])
    patches = {r["short"] for v in data["versions"] for r in v["rows"][1:]}
    assert {pair for pair, _ in rounds} == patches and len(patches) == 4
    assert all(len(v) == 2 for v in rounds.values()) and len(timed) == 4 * 2 * 6
    # the markdown to paste: the time rows of each table, within 100 columns
    lines = md.stdout.splitlines()
    assert sum(line.startswith("| `spin ns_per_iter` ") for line in lines) == 2
    assert sum(line.startswith("|   interval, 6 pairs ") for line in lines) == 2
    assert "- time: each patch against the one before it in paired rounds on box" in md.stdout
    assert all(len(line) <= 100 for line in lines)
