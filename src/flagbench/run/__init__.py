"""The run stage: typed benches and builds in, samples in the store out.

    kinds/        one module per bench kind (micro, memfn, wis, command): links the
                  harness programs and makes the engine's cells
    harness.py    harness programs (src/flagbench/harness/*.c) compiled and linked
    engine.py     interleaved, randomised rounds; every sample stored as taken; resume
    executors.py  one program run: native time, callgrind, qemu-user + plugin counts
    wis.py        the will-it-scale driver: programs, runs, its sample lines
    layout.py     relinks that move the code (the layout-noise band)
    profiled.py   one program run under a profiler (callgrind, the qemu plugin, perf record)
    qemu_plugin.py  the qemu instruction-count plugin, built on demand

flagbench.pipeline calls them in that order; every program goes through flagbench.procs.
"""
