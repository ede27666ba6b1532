"""A block's machine code as assembler text (llvm-mc --disassemble, the same LLVM that prices
it) and its cycles per execution on one core (llvm-mca: TotalCycles / Iterations of the block
repeated ITERATIONS times, its steady-state throughput with its own dependencies carried from
one repetition to the next; nothing of the blocks before or after it).

Both are kept on disk per (tool version, triple, features, core, text), so a block is priced
once per core however often it is asked for. Blocks go to llvm-mca together, one code region
each; a batch it refuses is priced block by block, and a block it cannot parse whole is priced
without the instructions it cannot (llvm-mca -skip-unsupported-instructions=any), the rest
reported as unpriced: never a silent zero.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from flagbench import procs
from flagbench.cache import cache_dir
from flagbench.errors import UserError

ITERATIONS = 100
CALL_LATENCY = 1             # a call priced as a taken branch: the callee's blocks are priced on their own
LLVM_MC, LLVM_MCA = "llvm-mc-19", "llvm-mca-19"
TIMEOUT = 120


@dataclass(frozen=True)
class Price:
    cycles: float | None         # per execution of the block; None: llvm-mca priced none of it
    priced: int                  # instructions llvm-mca priced (the rest are unpriced)


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name.rsplit("-", 1)[0])
    if found is None:
        raise UserError(f"the model needs {name}: apt-get install llvm-19")
    return found


@lru_cache(maxsize=None)
def version(name: str) -> str:
    done = procs.run([tool(name), "--version"], timeout=30)
    return " ".join(done.stdout.split())


def _path(kind: str, key_parts: list[str]) -> Path:
    return cache_dir() / "model" / kind / f"{hashlib.sha256(chr(0).join(key_parts).encode()).hexdigest()[:24]}.json"


def _cached(kind: str, key_parts: list[str], compute):
    path = _path(kind, key_parts)
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)
    return value


def disassemble(triple: str, mattr: str, code: bytes) -> list[str]:
    """The block's instructions as llvm-mc prints them, one a line (tabs made spaces)."""
    def compute():
        with tempfile.NamedTemporaryFile("w", suffix=".txt", prefix="flagbench-mc-") as f:
            f.write(" ".join(f"0x{b:02x}" for b in code) + "\n")
            f.flush()
            done = procs.run([tool(LLVM_MC), "--disassemble", f"-triple={triple}",
                              *([f"-mattr={mattr}"] if mattr else []), f.name], timeout=TIMEOUT)
        lines = [" ".join(ln.split()) for ln in done.stdout.splitlines()]
        return [ln for ln in lines if ln and not ln.startswith(".")]
    return _cached("mc", [version(LLVM_MC), triple, mattr, code.hex()], compute)


def _mca(triple: str, mattr: str, mcpu: str, texts: list[list[str]], skip: bool = False) -> list[dict] | None:
    source = []
    for i, text in enumerate(texts):
        source += [f"# LLVM-MCA-BEGIN b{i}", *text, f"# LLVM-MCA-END b{i}"]
    with tempfile.NamedTemporaryFile("w", suffix=".s", prefix="flagbench-mca-") as f:
        f.write("\n".join(source) + "\n")
        f.flush()
        argv = [tool(LLVM_MCA), f"-mtriple={triple}", f"-mcpu={mcpu}", *([f"-mattr={mattr}"] if mattr else []),
                f"-iterations={ITERATIONS}", f"-call-latency={CALL_LATENCY}", "--json", *(["-skip-unsupported-instructions=any"] if skip else []),
                f.name]
        done = procs.run(argv, timeout=TIMEOUT)
    if done.failure:
        return None
    try:
        regions = json.loads(done.stdout)["CodeRegions"]
    except (ValueError, KeyError):
        return None
    return [r["SummaryView"] for r in regions] if len(regions) == len(texts) else None


def _price(summary: dict) -> dict:
    iterations = summary.get("Iterations") or ITERATIONS
    priced = int(summary.get("Instructions", 0) // iterations)
    return {"cycles": summary["TotalCycles"] / iterations if priced else None, "priced": priced}


def price(triple: str, mattr: str, mcpu: str, texts: list[list[str]]) -> list[Price]:
    """Each block text's cycles per execution on MCPU."""
    keys = [[version(LLVM_MCA), triple, mattr, mcpu, str(ITERATIONS), str(CALL_LATENCY), "\n".join(t)] for t in texts]
    out: list[dict | None] = [None] * len(texts)
    missing = []
    for i, key in enumerate(keys):
        try:
            out[i] = json.loads(_path("mca", key).read_text())
        except (OSError, ValueError):
            missing.append(i)
    if missing:
        batch = _mca(triple, mattr, mcpu, [texts[i] for i in missing])
        for j, i in enumerate(missing):
            def compute(i=i, j=j):
                if batch is not None:
                    return _price(batch[j])
                alone = _mca(triple, mattr, mcpu, [texts[i]]) or _mca(triple, mattr, mcpu, [texts[i]], skip=True)
                return _price(alone[0]) if alone else {"cycles": None, "priced": 0}
            out[i] = _cached("mca", keys[i], compute)
    return [Price(p["cycles"], p["priced"]) for p in out]
