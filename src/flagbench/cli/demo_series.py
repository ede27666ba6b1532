"""`flagbench demo --full`: the series case (cases/series). Its repository is made once in the
cache from Debian's 6.1 tree by the case's own script (make-repo: the tree as one commit, then
four commits of the kind the seeds post), and the series comes as the list carries it: the case's
mbox (series.mbx, `git format-patch --cover-letter --base` of base..series), applied with `git am`
in a clone flagbench owns and measured as `flagbench series EXP --mbox` prints it: a row per patch,
pasteable as it stands. Its commits have the trees of base..series, so they are built in the
repository's own walked O= directory (and a test's or an earlier demo's builds are kept)."""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

NAME = "series"
RANGE = "base..series"
MBOX = "series.mbx"       # git format-patch --cover-letter --base=base base..series of make-repo's repository


def case_dir(root: Path) -> Path | None:
    """ROOT/series when the bundled series case is there (its experiment and its make-repo)."""
    d = root / NAME
    return d if (d / "series.toml").is_file() and (d / "make-repo").is_file() else None


def repo(case: Path, say=lambda s: None) -> Path:
    """The case's repository in the cache, made once (a minute or two here: a commit of the whole
    tree, hard-linked from Debian's, and four small ones). Shared with tests/test_series.py."""
    from flagbench import procs
    from flagbench.build import cache_dir
    from flagbench.cache import locked
    from flagbench.errors import UserError
    from flagbench.kbuild import source

    dest = cache_dir() / "repos" / "linux-6.1-series"
    with locked(dest.with_name(dest.name + ".lock")):
        if not (dest / ".git").is_dir():      # make-repo makes it beside and renames it into place
            tree = source.base_tree("debian:6.1", say)
            say(f"making the series case's repository {dest} from {tree.src} (once)")
            dest.parent.mkdir(parents=True, exist_ok=True)
            done = procs.run([sys.executable, str(case / "make-repo"), str(dest), "--tree", str(tree.src)],
                             timeout=1800)
            if done.failure:
                raise UserError(f"{case / 'make-repo'}: {(done.stderr.strip().splitlines() or [done.failure])[-1]}")
    return dest


def experiment(case: Path, repository: Path) -> Path:
    """series.toml as an experiment beside the repository: its source the repository, its
    relative paths made absolute, its programs copied."""
    text = (case / "series.toml").read_text()
    text = text.replace('source = "linux"', f'source = "{repository}"')
    text = re.sub(r'"(\.\./[^"]+)"', lambda m: f'"{(case / m.group(1)).resolve()}"', text)
    out = repository.with_name(repository.name + "-experiment")
    out.mkdir(exist_ok=True)
    for program in case.glob("*.c"):
        shutil.copyfile(program, out / program.name)
    (out / "experiment.toml").write_text(text)
    return out


def blocks(case: Path, say, db: Path = Path("flagbench.db"), fresh: bool = False) -> tuple[list, list, int]:
    """(report section, summary line, exit status) of the series case, a run of DB (resumed)."""
    from flagbench.mail.run import by_authors, measure
    from flagbench.report.doc import Code, Heading, Link, Para
    from flagbench.series_table import text

    # base-commit: in the mails names the base on a machine whose Debian tree made the same one;
    # elsewhere the repository's tag (a note under the table says which)
    run = measure(experiment(case, repo(case, say)), str(case / MBOX), base="base", db=db, progress=True,
                  fresh=fresh)
    if run.status > 1:   # interrupted: the run keeps what was measured, the demo's next run resumes it
        raise KeyboardInterrupt()
    series = by_authors(run)
    lines = text(series).rstrip("\n").splitlines()
    built = sum(r.built for r in series.rows[1:])
    section = [Heading(2, f"{NAME}: a patch series from its mails (cases/series/{MBOX})", NAME),
               Para(["flagbench series --mbox over the case's mails (git format-patch --cover-letter --base "
                     "of the commits cases/series/make-repo makes on Debian's 6.1 tree): each patch applied "
                     "with git am in a clone flagbench owns, built in the repository's one O= directory walked "
                     "patch by patch, compared with the one before it and with the base."]),
               Code(lines)]
    summary = [Para([Link(NAME, NAME), f": {len(series.rows) - 1} patches from their mbox, {built} built, "
                     f"in {series.seconds:.0f} s (a row per patch: size, asm, exact counts)"])]
    return section, summary, 0 if series.rows[0].built else 1
