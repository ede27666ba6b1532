"""What a host is and what would make its timings noisy: read once over its connection.

`read_facts(conn)` runs one POSIX sh script there (uname, /proc, /sys; perf if present) and
returns plain data stored with every run: machine, cpu model and count, kernel, frequency
governor, turbo/boost, SMT, isolated CPUs, ASLR, the clocksource, load, perf and which events
it counts.
`noise(facts)` lists what would make timings noisy there, each with the command that fixes
it, the way `pyperf system show` does; `flagbench doctor --host` prints both.
"""
from __future__ import annotations

PERF_EVENTS = ("cycles", "instructions", "cache-misses", "iTLB-load-misses", "branch-misses")
PERF_METRICS = {"cycles": "cycles", "instructions": "instructions", "cache-misses": "cache_misses",
                "iTLB-load-misses": "itlb_misses", "branch-misses": "branch_misses"}

SCRIPT = """s=/sys/devices/system/cpu
echo "machine=$(uname -m)"
echo "kernel=$(uname -r)"
echo "kernel_version=$(uname -v)"
echo "hostname=$(uname -n)"
echo "cpu=$(grep -m1 -E '^(model name|Model|cpu model|Processor|cpu)[[:space:]]*:' /proc/cpuinfo | cut -d: -f2-)"
echo "cpu_flags=$(grep -m1 -E '^(flags|Features)[[:space:]]*:' /proc/cpuinfo | cut -d: -f2-)"
echo "cpus=$(getconf _NPROCESSORS_ONLN 2>/dev/null || grep -c '^processor' /proc/cpuinfo)"
[ -r $s/cpu0/cpufreq/scaling_governor ] && echo "governor=$(cat $s/cpu0/cpufreq/scaling_governor)"
[ -r $s/cpu0/cpufreq/scaling_driver ] && echo "freq_driver=$(cat $s/cpu0/cpufreq/scaling_driver)"
[ -r $s/intel_pstate/no_turbo ] && echo "no_turbo=$(cat $s/intel_pstate/no_turbo)"
[ -r $s/cpufreq/boost ] && echo "boost=$(cat $s/cpufreq/boost)"
[ -r $s/smt/active ] && echo "smt=$(cat $s/smt/active)"
echo "isolated=$(cat $s/isolated 2>/dev/null)"
echo "aslr=$(cat /proc/sys/kernel/randomize_va_space 2>/dev/null)"
c=/sys/devices/system/clocksource/clocksource0/current_clocksource
[ -r $c ] && echo "clocksource=$(cat $c)"
echo "perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
echo "load=$(cat /proc/loadavg 2>/dev/null)"
command -v taskset >/dev/null 2>&1 && echo "taskset=$(command -v taskset)"
if command -v perf >/dev/null 2>&1; then
  echo "perf=$(command -v perf)"
  perf stat -x, -e "$1" -- true 2>&1 >/dev/null | sed 's/^/perf_line=/'
fi
"""


def read_facts(conn, timeout: float = 60) -> dict:
    """The host's facts (see the module docstring); a host without sh/uname is a HostError."""
    from flagbench.hosts.ssh import HostError

    done = conn.shell(SCRIPT, ",".join(PERF_EVENTS), timeout=timeout)
    if done.returncode is None or done.lost or "machine=" not in done.stdout:
        raise HostError(f"host {conn.dest}: cannot read what it is (needs a POSIX sh and uname): "
                        f"{done.failure or done.stderr.strip()[-200:] or 'no answer'}")
    facts: dict = {"perf_lines": []}
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key == "perf_line":
            facts["perf_lines"].append(value)
        elif key:
            facts[key] = value.strip()
    cpus = facts.get("cpus", "")
    facts["cpus"] = int(cpus) if cpus.isascii() and cpus.isdigit() and 0 < int(cpus) < 1 << 20 else None
    facts["cpu_features"] = copy_features(facts.pop("cpu_flags", ""))
    facts["perf_events"] = counted_events(facts.pop("perf_lines")) if facts.get("perf") else []
    facts["loadavg"] = loadavg(facts.get("load", ""))
    return facts


def loadavg(text: str) -> list[float] | None:
    """/proc/loadavg's three averages, or None for what it cannot say (nan, negative, missing).

    >>> loadavg("0.52 0.61 0.70 2/300 1234"), loadavg("nan 1 1"), loadavg("-1 0 0")
    ([0.52, 0.61, 0.7], None, None)
    """
    try:
        values = [float(x) for x in text.split()[:3]]
    except ValueError:
        return None
    if len(values) < 3 or not all(0 <= v < 1e6 for v in values):   # NaN fails every comparison
        return None
    return values


# CPU features that decide how string instructions and wide copies perform (seed 003: `rep movsq`
# is slow where short rep movs are not fast, and fast where they are): shown in every run's header.
COPY_FEATURES = ("erms", "fsrm", "fzrm", "fsrs", "fsrc", "avx2", "avx512f")


def copy_features(flags: str) -> list[str]:
    """The COPY_FEATURES among a /proc/cpuinfo flags line's words.

    >>> copy_features("fpu sse2 avx2 erms fsrm rdpid")
    ['erms', 'fsrm', 'avx2']
    """
    have = set(flags.split())
    return [f for f in COPY_FEATURES if f in have]


def counted_events(lines: list[str]) -> list[str]:
    """The events of a `perf stat -x,` probe that came back with a number.

    >>> counted_events(["12345,,cycles,100.00,,", "<not supported>,,instructions,0,100.00,,"])
    ['cycles']
    """
    out = []
    for line in lines:
        fields = line.split(",")
        if len(fields) >= 3 and fields[2] in PERF_EVENTS and fields[0].replace(".", "", 1).isdigit():
            out.append(fields[2])
    return out


def noise(facts: dict) -> list[tuple[str, str]]:
    """(what is noisy, the command that fixes it) for the host's facts."""
    out = []
    gov = facts.get("governor")
    if gov and gov != "performance":
        out.append((f"CPU frequency governor is {gov}, not performance",
                    "cpupower frequency-set -g performance"))
    if facts.get("no_turbo") == "0":
        out.append(("turbo is on (intel_pstate)", "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo"))
    if facts.get("boost") == "1":
        out.append(("frequency boost is on", "echo 0 > /sys/devices/system/cpu/cpufreq/boost"))
    if facts.get("smt") == "1":
        out.append(("SMT is on: a sibling thread shares the core", "echo off > /sys/devices/system/cpu/smt/control"))
    if not facts.get("isolated"):
        out.append(("no isolated CPU", "boot with isolcpus=N nohz_full=N rcu_nocbs=N, then run with --cpu N"))
    if facts.get("aslr") not in (None, "", "0"):
        out.append(("address space layout randomization is on", "echo 0 > /proc/sys/kernel/randomize_va_space"))
    clock = clock_problem(facts)
    if clock:
        out.append((clock, "boot it with a TSC it trusts (tsc=reliable where the TSC is "
                    "sound, as under qemu TCG), or time on another host"))
    load = facts.get("loadavg")
    if load and facts.get("cpus") and load[0] > 0.5:
        out.append((f"the host is busy: load {load[0]:.2f}", "stop what else runs there"))
    return out


# Clocksources that advance once a timer tick: a clock read there moves in steps of 1/HZ (1 to
# 10 ms), so a timed call of 20 ms reads as one, two or more ticks, or none at all.
TICK_CLOCKSOURCES = ("jiffies", "refined-jiffies")


def clock_problem(facts: dict) -> str | None:
    """Why times taken on the host would be worthless, or None: a tick-counting clocksource.

    >>> clock_problem({"clocksource": "tsc"}) is None, clock_problem({}) is None
    (True, True)
    >>> clock_problem({"clocksource": "refined-jiffies"}).split(":")[0]
    'its clocksource is refined-jiffies'
    """
    source = facts.get("clocksource")
    if source not in TICK_CLOCKSOURCES:
        return None
    return (f"its clocksource is {source}: clock reads move once a timer tick (1-10 ms), so a timed "
            "call reads as whole ticks or 0 (a TSC marked unstable? dmesg says; under qemu "
            "TCG boot with tsc=reliable)")


def perf_problem(facts: dict) -> str | None:
    """Why perf adds no counters there, or None when it counts every event flagbench asks for."""
    if not facts.get("perf"):
        return "no perf there (install linux-perf / linux-tools)"
    missing = [e for e in PERF_EVENTS if e not in facts.get("perf_events", [])]
    if not missing:
        return None
    what = "counts none of" if len(missing) == len(PERF_EVENTS) else "cannot count"
    return (f"perf {what} {', '.join(missing)} (no PMU, as in most VMs, or not allowed: "
            f"sysctl kernel.perf_event_paranoid=1)")
