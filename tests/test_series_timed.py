"""`flagbench series --host H`: each commit timed against its first parent in paired rounds on a
real OpenSSH server on 127.0.0.1 (tests/sshd_util.py), the rows' exact counts taken here."""
from __future__ import annotations

import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path

from conftest import flagbench, write_experiment
from flagbench.store import Store
from sshd_util import sshd_server

EXPERIMENT = """\
sources = ["spin.c"]
targets = ["x86_64"]
cflags = ["-O1"]
[variants]
default = {}
[[bench]]
name = "spin"
kind = "micro"
function = "spin"
metrics = ["time", "insns"]
samples = 4
timeout = 300
"""
SPIN_C = """#include <stdint.h>
uint64_t spin(uint64_t n)
{
\tuint64_t acc = 1;
\tfor (uint64_t i = 0; i < n; i++) {
\t\t__asm__ volatile(".rept WORK\\n\\tnop\\n\\t.endr");
\t\tacc = acc * 3 + i;
\t}
\treturn acc;
}
"""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_series_on_a_host_times_each_commit_against_its_first_parent_in_paired_rounds(tmp_path):
    repo = tmp_path / "repo"
    write_experiment(repo, EXPERIMENT, {"spin.c": SPIN_C.replace("WORK", "1")})
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "tag", "base")
    (repo / "spin.c").write_text(SPIN_C.replace("WORK", "9"))       # eight nops more an iteration
    git(repo, "commit", "-q", "-a", "-m", "spin: 9 nops")
    (repo / "spin.c").write_text(SPIN_C.replace("WORK", "9") + "/* a comment */\n")   # nothing the bench runs
    git(repo, "commit", "-q", "-a", "-m", "spin: a comment")
    more, same = git(repo, "rev-list", "--reverse", "base..main").split()
    db = tmp_path / "fb.db"
    with sshd_server(tmp_path / "box", alias="box") as box:
        done = flagbench("series", repo, "base..main", "--host", "box", "--db", db, "--format", "json",
                         env={"FLAGBENCH_SSH": box.ssh_env}, cache=tmp_path / "cache", timeout=900)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert [r["sha"] for r in rows[1:]] == [more, same]
    assert rows[1]["counts"]["spin insns_per_iter"] - rows[0]["counts"]["spin insns_per_iter"] == 8
    for r in rows[1:]:
        (t,) = r["timed"]
        assert t["label"] == "spin ns_per_iter" and t["pairs"] == 4 and t["estimate"] > 0
    with Store(db, create=False) as store:
        run = store.runs()[-1]
        timed = [s for s in store.samples(run["id"]) if s["provenance"].get("job") == "sample"]
    # each pair row (params pair=COMMIT) holds the commit and its first parent, round by round, on the box
    rounds = defaultdict(set)
    for s in timed:
        assert s["provenance"]["host"] == "box"
        rounds[(s["params"]["pair"], s["provenance"]["round"])].add(s["variant"])
    assert len(timed) == 2 * 2 * 4
    assert {pair for pair, _ in rounds} == {more[:12], same[:12]}
    assert all(len(v) == 2 for v in rounds.values())
    text = flagbench("report", str(run["id"]), "--db", db)
    assert text.returncode == 0, text.stderr
    assert f"time on box, {more[:12]} against {rows[0]['short']} in 4 paired rounds: spin ns_per_iter" in text.stdout
