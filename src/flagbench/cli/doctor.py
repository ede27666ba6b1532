"""`flagbench doctor`: which tools are here for each target, and what to install."""
from __future__ import annotations


def register(sub):
    p = sub.add_parser("doctor", help="list compilers, disassemblers and runners per target")
    p.add_argument("--format", choices=("text", "json"), default="text")
    return p


def run(args) -> int:
    import json

    from flagbench import toolchains

    rows = toolchains.doctor_rows()
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'target':<12} {'gcc':<24} {'clang':<9} {'objdump':<26} {'runner':<18} install")
    for r in rows:
        cells = []
        for key, width in (("gcc", 24), ("clang", 9), ("objdump", 26), ("runner", 18)):
            tool = r["tools"].get(key)
            text = "-" if tool is None else (tool if r["present"][key] else f"({tool} missing)")
            cells.append(f"{text:<{width}}")
        print(f"{r['target']:<12} " + " ".join(cells) + " " + (" ".join(r["install"]) or "ok"))
    return 0
