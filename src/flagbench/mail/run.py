"""An mbox measured as a series: parse (parse.py), apply in the owned clone (apply.py), then
series_cells.run_series on the base and the applied commits. A patch that did not apply is a row of
its own (series_table prints its error), and the next applied commit is compared with the last
one that applied and built, as series.py compares any commit with the last that built."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from flagbench import series_store, spec, subject, vcs
from flagbench.errors import UserError
from flagbench.mail import apply, parse
from flagbench.series import Row, Series
from flagbench.series_cells import run_series
from flagbench.textsafe import sayer, term_text


@dataclass
class MailRun:
    exp: spec.Experiment
    mail: parse.MailSeries
    applied: apply.Applied
    series: Series
    rows: dict[int, Row]        # index in mail.patches -> its row
    status: int                 # the engine's exit status (series_cells.run_series)


@dataclass(frozen=True)
class Unapplied:
    """A row's commit where a patch did not apply: shaped as a CommitRecord, named "patch k/n"."""
    name: str
    subject: str
    sha: str = ""
    tree: str = ""
    parents: tuple = ()
    first_parent = None
    merge = False

    @property
    def short(self) -> str:
        return self.name

    def to_json(self) -> dict:
        return {"sha": None, "tree": None, "subject": self.subject, "parents": []}


def base_ref(exp: spec.Experiment, repo: Path, mail: parse.MailSeries, base: str | None,
             variant: str | None) -> tuple[str, str]:
    """(the ref the patches go onto, where it came from): base-commit: from the mails, else
    --base (also when the repository lacks the mails' base-commit), else the template variant's
    ref, else HEAD (the experiment's tree as committed)."""
    if mail.base_commit:
        try:
            vcs.resolve(repo, mail.base_commit)
            return mail.base_commit, "base-commit: in the mails"
        except vcs.UnknownRef:
            if not base:
                raise UserError(f"{mail.source}: base-commit {mail.base_commit[:12]} (from the mails) is not in "
                                f"{repo}: fetch it, or give --base REF") from None
            return base, f"--base (the mails' base-commit {mail.base_commit[:12]} is not in the repository)"
    if base:
        return base, "--base"
    template = exp.variant(variant) if variant else exp.variants[0]
    if template.commit is not None:
        return template.commit.sha, f"variant {template.name}'s ref"
    return "HEAD", "the repository's HEAD (no base-commit: in the mails, no --base)"


def relocated(exp: spec.Experiment, repo: Path, clone: Path) -> spec.Experiment:
    """EXP with its C sources named in the clone (series reads them at each commit of it)."""
    def move(paths):
        out = []
        for p in paths:
            try:
                out.append(clone / Path(p).resolve().relative_to(repo))
            except ValueError:
                raise UserError(f"{exp.path}: source {p} is outside the repository {repo} the patches "
                                "apply to") from None
        return tuple(out)
    variants = tuple(replace(v, sources=move(v.sources)) if v.sources and v.commit is None else v
                     for v in exp.variants)
    return replace(exp, sources=move(exp.sources), variants=variants)


def measure(path, source: str, *, base: str | None = None, variant: str | None = None,
            target: str | None = None, compiler: str | None = None, jobs: int | None = None,
            progress: bool = True, asm: bool = True, counts: bool = True,
            mail: parse.MailSeries | None = None, db: Path, fresh: bool = False, fleet=None) -> MailRun:
    say = sayer("flagbench series: ", quiet=not progress)
    exp = spec.load(path)
    repo = subject.of(exp).repository()
    if repo is None:
        raise UserError(f"{exp.path}: a series from mail needs the experiment's sources (or [kernel] source) "
                        "in a git repository")
    mail = mail or parse.load(source)
    for note in mail.notes:
        say(f"{source}: {note}")
    ref, why = base_ref(exp, repo, mail, base, variant)
    applied = apply.apply_series(repo, mail, ref, say)
    say(f"{len(applied.commits)} of {len(mail.patches)} patch(es) applied onto {applied.base.short} ({why})")
    rexp = relocated(exp, repo, applied.clone) if subject.of(exp).kind == "c" else exp   # C sources: the clone's
    label = f"{mail.name[:60]} v{mail.version}"
    commits = [applied.base, *applied.commits]
    series, status = run_series(path, label, db=db, variant=variant, target=target, compiler=compiler, jobs=jobs,
                                progress=progress, asm=asm, counts=counts, experiment=rexp, fresh=fresh, fleet=fleet,
                                given=(applied.clone, commits, series_store.records(applied.clone, commits)))
    series.repo = str(repo)
    series.range = f"{label} ({'stdin' if source == '-' else source}) on {applied.base.short}"
    series.notes[:0] = [f"{source}: {n}" for n in mail.notes] + [f"base: {why}"]
    by_sha = {r.commit.sha: r for r in series.rows}
    rows, ordered = {}, [series.rows[0]]
    for i, (p, commit, why_not) in enumerate(applied.results):
        if commit is not None:
            row = by_sha[commit.sha]
        else:
            n = p.number if p.number is not None else i + 1
            row = Row(Unapplied(f"patch {n}/{p.total or len(mail.patches)}", p.subject), error=why_not)
        row.commit = replace(row.commit, subject=term_text(p.subject))
        rows[i] = row
        ordered.append(row)
    series.rows = ordered
    return MailRun(exp, mail, applied, series, rows, status)


def with_authors(run: MailRun) -> Series:
    """The series with each patch's author after its subject (text, md and html rows)."""
    rows = [run.series.rows[0]]
    for i, p in enumerate(run.mail.patches):
        row = run.rows[i]
        rows.append(replace(row, commit=replace(row.commit, subject=f"{row.commit.subject} ({p.author_name})")))
    return replace(run.series, rows=rows)


def by_authors(run: MailRun) -> Series:
    """The series with a note naming each patch's author (the text table has no room for them)."""
    authors: dict[str, list[str]] = {}
    for i, p in enumerate(run.mail.patches, 1):
        authors.setdefault(p.author, []).append(str(p.number or i))
    line = "; ".join(f"{a}: {', '.join(n)}" for a, n in authors.items())
    return replace(run.series, notes=[*run.series.notes, f"patches by {line}"])


def as_json(run: MailRun) -> dict:
    from flagbench.series_table import as_json as series_json

    data = series_json(run.series)
    data["mail"] = {"source": run.mail.source, "name": run.mail.name, "version": run.mail.version,
                    "base_commit": run.mail.base_commit, "clone": str(run.applied.clone)}
    for i, p in enumerate(run.mail.patches):
        data["rows"][i + 1].update({"patch": p.label, "author": p.author, "message_id": p.message_id,
                                    "applied": not isinstance(run.rows[i].commit, Unapplied)})
    return data
