"""Running benchmarks: executors (native time, callgrind, qemu + plugin) and will-it-scale."""
