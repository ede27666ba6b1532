"""Changes inside what the watch skipped (`--stride K` measures every K-th new commit): each
measured commit whose exact counts differ from the commit it was compared with, across skipped
commits, is bisected to the commit that made the difference, on counts (exact: one build and
one counted run a step, as `flagbench bisect` does on insns), then that commit is compared with
its own parent, so its finding names it, with its cause.

A step that does not build is left out (git bisect's skip); a step measured once is stored like
any commit and never measured again; the commit that closed the gap is compared again with
its new predecessor, its counts copied from the run that counted them.
"""
from __future__ import annotations

SKIPPED = "skipped"


def _unmeasured(ledger, sha: str) -> bool:
    ev = ledger.evidence(sha)
    return ev is None or ev.get("error", "").startswith(SKIPPED)


def _built(ledger, sha: str) -> dict | None:
    ev = ledger.evidence(sha)
    return ev if ev and ev.get("built") else None


def _same(a: float | None, b: float, floor: float | None) -> bool:
    """Equal counts (a user-mode count is exact), or a kernel's within its A/A floor."""
    return a is not None and abs(a - b) <= (floor or 0.0)


def crosses_skipped(ledger, chain, commit, prev) -> bool:
    shas = [c.sha for c in chain]
    lo, hi = shas.index(prev.sha), shas.index(commit.sha)
    return any(_unmeasured(ledger, c.sha) for c in chain[lo + 1:hi])


def bisect(ledger, chain, measure, say, stop) -> int:
    """Walk the chain until every built commit is compared with the last built one before it and
    no count moved across skipped commits; the steps measured."""
    steps, i = 0, 0
    while i < len(chain) and stop.signum is None:
        ev = _built(ledger, chain[i].sha)
        prev = next((j for j in range(i - 1, -1, -1) if _built(ledger, chain[j].sha)), None)
        if ev is None or prev is None:
            i += 1
            continue
        if ev["compared_with"] != chain[prev].sha:   # stale: a commit between was measured since
            measure(chain[i], counted_in=ev.get("run_id") or 0)
            steps += 1
            continue
        floor = ev.get("floor") or {}   # a kernel's A/A floor: a move within it is not one to bisect
        moved = any(not _same(ev["base_counts"][k], v, floor.get(k)) for k, v in ev["counts"].items()
                    if k in ev["base_counts"])
        candidates = [j for j in range(prev + 1, i) if _unmeasured(ledger, chain[j].sha)]
        if not (moved and candidates):
            i += 1
            continue
        say(f"bisect: {chain[i].short} moved against {chain[prev].short} across {len(candidates)} skipped commits")
        lo_counts = _built(ledger, chain[prev].sha)["counts"]
        while candidates and stop.signum is None:
            j = candidates[len(candidates) // 2]
            got = measure(chain[j]).to_json()
            steps += 1
            if not got["built"]:
                candidates.remove(j)
                continue
            same = all(_same(got["counts"].get(k), v, floor.get(k)) for k, v in lo_counts.items())
            candidates = [k for k in candidates if (k > j if same else k < j)]
            if same:
                lo_counts = got["counts"]
        i = prev + 1   # again from there: what is compared with what has changed
    return steps
