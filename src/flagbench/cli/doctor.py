"""`flagbench doctor`: which tools are here for each target, and what to install;
`flagbench doctor --host DEST`: whether a machine over ssh can time benches, whether it can
take kexec runs of kernel experiments (root, kexec, kexec_load_disabled, lockdown, its
/boot/vmlinuz-RELEASE to come back to), and what would make its timings noisy (with the
command that fixes each)."""
from __future__ import annotations

from flagbench.export import choices, described

FORMATS = choices("text", "json")


def register(sub):
    p = sub.add_parser("doctor", help="list compilers, disassemblers and runners per target")
    p.add_argument("--host", action="append", metavar="DEST", default=[],
                   help="check this ssh host instead (repeatable; FLAGBENCH_SSH replaces the ssh command)")
    p.add_argument("--format", choices=FORMATS, default="text", help=f"{described(FORMATS)} (default text)")
    return p


def run(args) -> int:
    import json
    import sys

    from flagbench import export, toolchains

    if args.host:
        return _hosts(args.host, args.format)
    rows = toolchains.doctor_rows()
    sys.stdout.write(export.render(args.format, {"text": lambda: _tools_text(rows),
                                                 "json": lambda: json.dumps(rows, indent=2) + "\n"}))
    return 0


def _tools_text(rows: list[dict]) -> str:
    out = [f"{'target':<12} {'gcc':<24} {'clang':<9} {'objdump':<26} {'runner':<18} install"]
    for r in rows:
        cells = []
        for key, width in (("gcc", 24), ("clang", 9), ("objdump", 26), ("runner", 18)):
            tool = r["tools"].get(key)
            text = "-" if tool is None else (tool if r["present"][key] else f"({tool} missing)")
            cells.append(f"{text:<{width}}")
        out.append(f"{r['target']:<12} " + " ".join(cells) + " " + (" ".join(r["install"]) or "ok"))
    return "".join(f"{line}\n" for line in out)


def _hosts(dests: list[str], fmt: str) -> int:
    """One block per host; exit 2 when a host cannot be reached (its line says why)."""
    import json
    import sys
    import time

    from flagbench import procs
    from flagbench.errors import UserError
    from flagbench.hosts.facts import noise, perf_problem
    from flagbench.hosts.factory import checked_place
    from flagbench.hosts import kexec
    from flagbench.toolchains import TARGETS

    procs.install()
    out, status = [], 0
    for dest in dests:
        host, started = checked_place(dest), time.monotonic()
        try:
            host.open()
        except UserError as e:
            out.append({"host": dest, "reachable": False, "error": str(e)})
            status = 2
            continue
        try:
            f = host.facts
            target = host.machine()
            out.append({"host": dest, "reachable": True, "connect_s": round(time.monotonic() - started, 2),
                        "facts": f, "takes": [target] if target in TARGETS else [],
                        "cannot": [t for t in TARGETS if t != target], "perf": perf_problem(f),
                        "noise": [{"what": w, "fix": fix} for w, fix in noise(f)],
                        "kexec": _kexec(host.conn, kexec)})
        finally:
            host.close()
    from flagbench import export
    if fmt == "text":     # the hosts that could not be reached: said on stderr, as errors are
        for r in out:
            if not r["reachable"]:
                print(f"flagbench doctor: {r['error']}", file=sys.stderr)
    sys.stdout.write(export.render(fmt, {"text": lambda: _hosts_text(out),
                                         "json": lambda: json.dumps(out, indent=2) + "\n"}))
    return status


def _hosts_text(hosts: list[dict]) -> str:
    """A block per host reached: what it is, whether it can take kexec runs, what makes it noisy."""
    out = []
    for r in hosts:
        if not r["reachable"]:
            continue
        f = r["facts"]
        out.append(f"{r['host']}: reachable ({r['connect_s']:.2f} s to connect); "
                   f"hostname {hostname(f.get('hostname'))}")
        out.append(f"  machine   {f.get('machine')}: takes {', '.join(r['takes']) or 'none of the targets'} "
                   f"programs; cannot run {', '.join(r['cannot'])}")
        out.append(f"  cpu       {f.get('cpu') or '?'} x {f.get('cpus') or '?'}; kernel {f.get('kernel')}")
        out.append(f"  taskset   {f.get('taskset') or 'missing: --cpu cannot pin there (install util-linux)'}")
        out.append(f"  perf      {r['perf'] or 'counts ' + ', '.join(f['perf_events'])}; "
                   f"perf_event_paranoid = {f.get('perf_event_paranoid') or '?'}")
        out.append(f"  governor  {f.get('governor') or '? (no cpufreq)'}; isolated CPUs {f.get('isolated') or 'none'}; "
                   f"load {' '.join(map(str, f.get('loadavg') or ['?']))}")
        k = r["kexec"]
        out.append("  kexec     " + (f"ready: kernel experiments can run there (kernel {k['release']}, "
                                      f"{k['image']} to come back to)" if k["ready"] else
                                      "not ready: " + "; ".join(k["refusal"])))
        if r["noise"]:
            out.append("  noise:")
            width = max(len(n["what"]) for n in r["noise"])
            for n in r["noise"]:
                out.append(f"    {n['what']:<{width}}  fix: {n['fix']}")
        else:
            out.append("  noise: nothing found")
    return "".join(f"{line}\n" for line in out)


def hostname(name: str | None) -> str:
    """The host's own name (`uname -n`) as the report says it: a kernel nobody named (a box, an
    initramfs) answers "(none)", said as such.

    >>> hostname("build-7"), hostname("(none)"), hostname(None)
    ('build-7', 'not set (uname -n says "(none)")', 'unknown')
    """
    if not name:
        return "unknown"
    return 'not set (uname -n says "(none)")' if name == "(none)" else name


def _kexec(conn, kexec) -> dict:
    """Whether flagbench can kexec the host: kexec.inspect's facts and refusals (the ones a run
    would stop on), plus the running kernel's image in /boot, which restoring it needs."""
    from flagbench.errors import UserError
    try:
        host, refusal = kexec.inspect(conn)
    except UserError as e:
        return {"ready": False, "refusal": [str(e)], "release": "", "image": "", "initrd": "", "config": ""}
    if not host.image:
        refusal = [*refusal, f"no /boot/vmlinuz-{host.release} to kexec back into"]
    return {"ready": not refusal, "refusal": refusal, "release": host.release, "image": host.image,
            "initrd": host.initrd, "config": host.config}
