"""Taking profiles of an experiment's micro benches, keeping them, and printing their diff.

For every build (variant x target x compiler) of each micro bench: the harness program is linked
as `flagbench run` links it and run exactly as the instruction counts are (same argv, same fixed
environment), with n and 2n iterations, under callgrind (x86_64) or qemu + the plugin's
profile=FILE (other targets): an exact profile per iteration. On x86_64 also `perf record -e
cpu-clock` of a timed run (~0.5 s) where perf works: time shares. Profiles are stored in the
results database (table `profiles`, keyed by the experiment's hash), so a second `flagbench
profile` prints without measuring.
"""
from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from pathlib import Path

from flagbench import procs
from flagbench.errors import UserError
from flagbench.profile import (Profile, SymbolMap, attribute, diff, parse_callgrind, parse_perf_script,
                               parse_plugin_profile, per_iteration)

HOST = "x86_64"
PERF_SECONDS = 0.5
FORMATS = ("text", "md", "json", "csv")

_SCHEMA = """CREATE TABLE IF NOT EXISTS profiles (
    experiment_hash TEXT NOT NULL, bench TEXT NOT NULL, target TEXT NOT NULL, compiler TEXT NOT NULL,
    variant TEXT NOT NULL, source TEXT NOT NULL, profile TEXT NOT NULL,
    PRIMARY KEY (experiment_hash, bench, target, compiler, variant, source))"""


# -- running ------------------------------------------------------------------------------------

def _argv(exe: Path, iters: int) -> list[str]:
    from flagbench.run.kinds.context import pad
    return [str(exe), "c", pad(iters)]


def _run(argv: list[str], timeout: float) -> procs.Done:
    from flagbench.run.executors import FIXED_CWD, FIXED_ENV
    done = procs.run(argv, timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV)
    if done.failure:
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        raise UserError(f"{Path(argv[0]).name} {' '.join(argv[1:3])}...: {done.failure} {tail[0]}".rstrip())
    return done


def callgrind_counts(exe: Path, iters: int, tmp: Path, timeout: float) -> tuple[dict[str, int], int]:
    """Self Ir per function of one run under callgrind, and its total."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise UserError("exact profiles on x86_64 need valgrind: apt-get install valgrind")
    out = tmp / f"callgrind.{iters}"
    _run([valgrind, "-q", "--tool=callgrind", f"--callgrind-out-file={out}", "--cache-sim=no",
          "--branch-sim=no", "--compress-strings=no", "--compress-pos=no", *_argv(exe, iters)], timeout)
    selves, total = parse_callgrind(out.read_text(errors="replace"))
    if total is None:
        raise UserError(f"callgrind wrote no total for {exe.name}")
    return selves, total


def plugin_counts(exe: Path, target: str, iters: int, tmp: Path, timeout: float,
                  symbols: SymbolMap) -> tuple[dict[str, int], int]:
    """Instructions per symbol of one run under qemu + the plugin, and the plugin's own total."""
    from flagbench.run.executors import QEMU_CPU_ARGS
    from flagbench.run.qemu_plugin import plugin_path
    from flagbench.toolchains import get_target

    runner = shutil.which(get_target(target).qemu or "")
    if runner is None:
        raise UserError(f"profiles of {target} programs need qemu-user: apt-get install qemu-user")
    counts, profile = tmp / f"counts.{iters}", tmp / f"profile.{iters}"
    options = f"{plugin_path()},outfile={counts},mem=off,profile={profile}"
    _run([runner, *QEMU_CPU_ARGS.get(target, ()), "-plugin", options, *_argv(exe, iters)], timeout)
    total = next((int(line.split()[1]) for line in counts.read_text().splitlines() if line.startswith("insns ")),
                 None)
    text = profile.read_text()
    if total is None or text.startswith("# incomplete"):
        raise UserError(f"the qemu plugin wrote no complete profile for {exe.name}")
    return attribute(parse_plugin_profile(text), symbols), total


def exact_profile(exe: Path, target: str, iters: int, tmp: Path, timeout: float) -> tuple[dict[str, float], float, str]:
    """(self per iteration by symbol, total per iteration, source): n and 2n iterations differenced."""
    if target == HOST:
        small, t_small = callgrind_counts(exe, iters, tmp, timeout)
        large, t_large = callgrind_counts(exe, 2 * iters, tmp, timeout)
        source = "callgrind"
    else:
        symbols = SymbolMap.of_elf(exe)
        small, t_small = plugin_counts(exe, target, iters, tmp, timeout, symbols)
        large, t_large = plugin_counts(exe, target, 2 * iters, tmp, timeout, symbols)
        source = "qemu-plugin"
    return per_iteration(small, large, iters), (t_large - t_small) / iters, source


def perf_profile(exe: Path, tmp: Path, timeout: float) -> tuple[dict[str, float], float] | str:
    """Samples per symbol of a ~0.5 s timed run under `perf record -e cpu-clock`, or why not."""
    from flagbench.run.executors import FIXED_CWD, FIXED_ENV, parse_metrics, perf_available
    perf = shutil.which("perf")
    if perf is None or not perf_available():
        return "perf does not work here (apt-get install linux-perf; kernel.perf_event_paranoid): no time profile"
    calibration, _ = parse_metrics(_run([str(exe)], timeout).stdout)   # one call of >= 20 ms: "iters N", "ns T"
    n = max(1, int(calibration.get("iters", 1) * PERF_SECONDS * 1e9 / max(calibration.get("ns", 1), 1)))
    data = tmp / "perf.data"
    done = procs.run([perf, "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", str(data), "--",
                      str(exe), "t", str(n)], timeout=timeout, cwd=FIXED_CWD, env=FIXED_ENV)
    if done.failure or not data.exists():
        return f"perf record failed ({done.failure or 'no data'}): no time profile"
    script = procs.run([perf, "script", "-i", str(data), "-F", "ip,sym"], timeout=timeout, env=FIXED_ENV)
    samples = parse_perf_script(script.stdout)
    if not samples:
        return "perf recorded no samples: no time profile"
    return dict(samples), float(sum(samples.values()))


# -- storing ------------------------------------------------------------------------------------

class ProfileStore:
    """Profiles in the results database, next to the samples (their own table)."""

    def __init__(self, db: Path):
        from flagbench.store import Store
        Store(db).close()                  # the database exists and is a flagbench one
        self.db = sqlite3.connect(db, timeout=30, isolation_level=None)
        self.db.execute(_SCHEMA)

    def get(self, key: tuple) -> Profile | None:
        row = self.db.execute("SELECT profile FROM profiles WHERE experiment_hash=? AND bench=? AND target=? AND "
                              "compiler=? AND variant=? AND source=?", key).fetchone()
        return None if row is None else _profile(json.loads(row[0]))

    def put(self, experiment_hash: str, p: Profile) -> None:
        self.db.execute("INSERT OR REPLACE INTO profiles VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (experiment_hash, p.bench, p.target, p.compiler, p.variant, p.source,
                         json.dumps(p.to_json())))

    def close(self) -> None:
        self.db.close()


def stored_profiles(store, experiment_hash: str) -> list[Profile]:
    """The profiles `flagbench profile` kept for an experiment, read through an open Store's file
    (none when it never ran: the table does not exist yet)."""
    db = sqlite3.connect(f"{Path(store.path).resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        rows = db.execute("SELECT profile FROM profiles WHERE experiment_hash = ? ORDER BY rowid",
                          (experiment_hash,)).fetchall()
    except sqlite3.DatabaseError:
        return []
    finally:
        db.close()
    return [_profile(json.loads(r[0])) for r in rows]


def _profile(d: dict) -> Profile:
    return Profile(d["bench"], d["target"], d["compiler"], d["variant"], d["exact"], d["source"], d["total"],
                   {s["name"]: s["self"] for s in d["symbols"]})


# -- an experiment -------------------------------------------------------------------------------

def profile_experiment(exp, builds, benches, *, db: Path, workdir: Path, fresh: bool = False, say=print,
                       perf: bool = True) -> tuple[list[Profile], list[str]]:
    """Every micro bench of `benches` on every build: an exact profile, and a perf one on x86_64."""
    from flagbench.run.harness import MICRO_C, Program, link_with_build

    notes: list[str] = []
    store = ProfileStore(db)
    out: list[Profile] = []
    try:
        for bench in benches:
            if bench.kind != "micro":
                notes.append(f"bench {bench.name}: profiles are taken of micro benches only (kind {bench.kind})")
                continue
            for b in builds:
                target, compiler, variant = b.cell.target, b.cell.compiler, b.cell.variant.name
                if bench.targets is not None and target not in bench.targets:
                    continue
                from flagbench.toolchains import get_target
                if not get_target(target).runnable:
                    notes.append(f"{target}: objects only, no profile")
                    continue
                sources = ["callgrind" if target == HOST else "qemu-plugin"] + (["perf"] if perf and target == HOST
                                                                                 else [])
                if perf and target != HOST:
                    notes.append(f"{target}: no time profile (its programs run under qemu, whose time is not "
                                 f"theirs); the exact profile only")
                wanted = {s: (exp.hash, bench.name, target, compiler, variant, s) for s in sources}
                have = {s: None if fresh else store.get(k) for s, k in wanted.items()}
                if all(have.values()):
                    out += list(have.values())
                    continue
                where = workdir / bench.name / variant / target / compiler
                where.mkdir(parents=True, exist_ok=True)
                exe = link_with_build(b, Program(MICRO_C, (f"-DFB_FN={bench.function}",), f"micro-{bench.function}"),
                                      where)
                for source in sources:
                    if have[source]:
                        out.append(have[source])
                        continue
                    say(f"{source} profile of {bench.name} {variant}/{target}/{compiler}")
                    if source == "perf":
                        got = perf_profile(exe, where, bench.timeout)
                        if isinstance(got, str):
                            notes.append(got)
                            continue
                        symbols, total = got
                        p = Profile(bench.name, target, compiler, variant, False, "perf", total, symbols)
                    else:
                        symbols, total, source = exact_profile(exe, target, bench.count_iters, where, bench.timeout)
                        p = Profile(bench.name, target, compiler, variant, True, source, total, symbols)
                    store.put(exp.hash, p)
                    out.append(p)
    finally:
        store.close()
    return out, list(dict.fromkeys(notes))


# -- printing -----------------------------------------------------------------------------------

def pairs(profiles: list[Profile], baseline: str):
    """(old, new) per bench x target x compiler x source: the baseline against each other variant."""
    by_key: dict[tuple, dict[str, Profile]] = {}
    for p in profiles:
        by_key.setdefault((p.bench, p.target, p.compiler, p.source), {})[p.variant] = p
    for key, variants in by_key.items():
        old = variants.get(baseline)
        if old is None:
            continue
        for name, new in variants.items():
            if name != baseline:
                yield old, new


def diff_rows(old: Profile, new: Profile, top: int | None = 8) -> tuple[list[str], list[list[str]]]:
    unit = "insns/iter" if old.exact else "samples"
    header = ["symbol", f"{old.variant} share", f"{new.variant} share", "change", f"{old.variant} {unit}",
              f"{new.variant} {unit}"]
    body = []
    rows = diff(old, new, None)
    if not old.exact:   # sampled: leave out what neither side spent half a percent in (kernel noise)
        rows = [r for r in rows if max(r.old_share, r.new_share) >= 0.005] or rows[:2]
    for r in rows[:top]:
        name = r.name + (f" ({', '.join(r.suffixes)})" if r.suffixes else "")
        body.append([name, f"{100 * r.old_share:.1f} %", f"{100 * r.new_share:.1f} %",
                     f"{100 * (r.new_share - r.old_share):+.1f} pt", _num(r.old), _num(r.new)])
    return header, body


def _num(v: float) -> str:
    return f"{v:.0f}" if v == int(v) else f"{v:.3g}"


def title(old: Profile, new: Profile) -> str:
    kind = "exact" if old.exact else "time (perf cpu-clock samples)"
    return (f"{old.bench} · profile, {kind}, {old.source} · {old.target}/{old.compiler}: {new.variant} vs "
            f"{old.variant} (total {_num(old.total)} -> {_num(new.total)})")


def blocks(profiles: list[Profile], baseline: str, *, prefix: str = "", notes: list[str] = ()):
    from flagbench.report.cells import slug
    from flagbench.report.doc import Bullets, Grid
    out = []
    for old, new in pairs(profiles, baseline):
        header, body = diff_rows(old, new)
        out.append(Grid(header, body, title=title(old, new), align="lrrrrr",
                        anchor=slug(prefix, old.bench, "profile", old.source, old.target, old.compiler, new.variant)))
    if notes:
        out.append(Bullets(list(notes)))
    return out


def render(profiles: list[Profile], baseline: str, fmt: str, notes: list[str] = ()) -> str:
    if fmt == "json":
        return json.dumps({"profiles": [p.to_json() for p in profiles], "notes": list(notes)}, indent=2) + "\n"
    if fmt == "csv":
        from flagbench.textsafe import csv_cell
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(["bench", "target", "compiler", "variant", "source", "exact", "total", "symbol", "self"])
        for p in profiles:
            for s in p.to_json()["symbols"]:
                writer.writerow([csv_cell(x) if isinstance(x, str) else x for x in
                                 (p.bench, p.target, p.compiler, p.variant, p.source, p.exact, p.total, s["name"],
                                  s["self"])])
        return buffer.getvalue()
    if fmt == "md":
        from flagbench.report.doc import Markdown
        return Markdown().render(blocks(profiles, baseline, notes=notes))
    if fmt == "text":
        from flagbench.textsafe import term_text
        lines = []
        for old, new in pairs(profiles, baseline):
            header, body = diff_rows(old, new)
            widths = [max(len(term_text(x)) for x in col) for col in zip(header, *body)]
            lines.append(term_text(title(old, new)))
            for row in [header] + body:
                lines.append("  ".join(term_text(x).ljust(w) if i == 0 else term_text(x).rjust(w)
                                       for i, (x, w) in enumerate(zip(row, widths))))
            lines.append("")
        lines += [f"note: {term_text(n)}" for n in notes]
        return "\n".join(lines) + "\n"
    raise ValueError(f"format must be one of {', '.join(FORMATS)}")
