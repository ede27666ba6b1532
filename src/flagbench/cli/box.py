"""`flagbench box start|stop|status|ssh-config|power`: a qemu machine to try the real-machine path
(`--host`, kexec) without hardware. `start` builds its kernel (cached) and boots it with ssh on
127.0.0.1 at a free port; it keeps running after `start` returns, until `stop`. `ssh-config`
prints its OpenSSH config, for FLAGBENCH_SSH="ssh -F FILE" (or ~/.ssh/config). `power
on|off|cycle` switches its qemu as a lab switches a board (what `--lab`'s place's power runs)."""
from __future__ import annotations

import shlex

ACTIONS = ("start", "stop", "status", "ssh-config", "power")
SWITCHES = ("on", "off", "cycle")


def register(sub):
    p = sub.add_parser("box", help="start, stop or show the qemu kexec box (a host to try --host on)",
                       description=__doc__.split("\n\n")[0].split(": ", 1)[1].replace("\n", " "))
    p.add_argument("action", choices=ACTIONS)
    p.add_argument("switch", nargs="?", choices=SWITCHES,
                   help="power: on (boots it unless it runs), off (stops its qemu, not its lab) or cycle; "
                        "what the --lab place's power driver runs")
    p.add_argument("--name", default="box", help="the box's name and ssh alias (default box); "
                   "its state is in <cache>/box/NAME")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress")
    p.add_argument("--lab", action="store_true",
                   help="start: also a labgrid coordinator and exporter on 127.0.0.1 with the box as place NAME "
                        "(tag arch=x86_64), to try --place without hardware; `box stop` stops them "
                        "(docs/places.md)")
    return p


def run(args) -> int:
    import re
    import sys

    from flagbench.errors import UserError
    from flagbench.run.guest import box
    from flagbench.textsafe import sayer

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", args.name):
        raise UserError(f"box name {args.name!r}: letters, digits, '.', '_' and '-' only")
    home = box.home(args.name)
    if (args.action == "power") != (args.switch is not None):
        raise UserError("`flagbench box power` takes on, off or cycle; the other actions take none")
    if args.action == "power":
        from flagbench import procs
        procs.install()
        box.power(home, args.name, args.switch, sayer(f"flagbench box: {args.name}: ", quiet=args.quiet))
        return 0
    if args.action == "stop":     # also what clears a damaged state
        from flagbench.run.guest.box_lab import stop_lab
        if stop_lab(home / "lab"):
            print(f"{args.name}: its lab stopped (labgrid coordinator and exporter)")
        if box.stop(home):
            print(f"{args.name}: stopped")
        else:
            print(f"{args.name}: not running")
        return 0
    b = box.load(home)           # a damaged state.json: one line, exit 2 (stop clears it)
    if args.action == "start":
        if b is not None:
            print(f"{args.name}: already running (qemu pid {b.pid}, ssh on 127.0.0.1:{b.port})", file=sys.stderr)
        else:
            from flagbench import procs
            procs.install()   # a signal while it builds or boots: make killed, qemu stopped (box.start)
            say = sayer(f"flagbench box: {args.name}: ", quiet=args.quiet)
            b = box.start(home, args.name, say, progress=not args.quiet)
        _usage(b)
        if args.lab:
            _lab(home, b)
        return 0
    if b is None:
        if args.action == "status":
            why = box.unfinished(home)
            print(f"{args.name}: not running" + (f": {why}" if why else "") +
                  f" (flagbench box start{_name_flag(args.name)})")
            return 1
        raise UserError(f"box {args.name} is not running: flagbench box start{_name_flag(args.name)}")
    if args.action == "ssh-config":
        print(f"# the box {args.name}: FLAGBENCH_SSH={shlex.quote(b.ssh_env)} flagbench run EXP --host {args.name}")
        print(b.config.read_text(), end="")
        return 0
    print(f"{args.name}: running (qemu pid {b.pid}), ssh on 127.0.0.1:{b.port}; state in {home}")
    _usage(b)
    return 0


def _lab(home, b) -> None:
    """The box's lab (run/guest/box_lab.py): started unless it runs, and the exports to use it;
    its place's power is `flagbench box power` on this box."""
    import sys
    from flagbench.run.guest.box_lab import load_lab, start_lab
    power = ["env", f"FLAGBENCH_CACHE={home.parent.parent}", sys.executable, "-m", "flagbench", "box", "power"]
    lab = load_lab(home / "lab") or start_lab(home / "lab", alias=b.alias, arch="x86_64",
                                              power=[*power, "SWITCH", "--name", b.alias, "-q"])
    print(f"  # the box as place {lab.place} of a labgrid lab on {lab.address} (files in {lab.dir}):\n"
          + "".join(f"  export {k}={v}\n" for k, v in lab.exports.items())
          + f"  flagbench run EXP --place {lab.place}       # or --place arch=x86_64")


def _name_flag(name: str) -> str:
    return "" if name == "box" else f" --name {name}"


def _usage(b) -> None:
    print(f"  export FLAGBENCH_SSH={shlex.quote(b.ssh_env)}\n"
          f"  flagbench doctor --host {b.alias}         # can it take kexec runs?\n"
          f"  flagbench run EXP --host {b.alias}        # config = \"host\" builds the box's own config\n"
          f"  flagbench box stop{_name_flag(b.alias)}")
