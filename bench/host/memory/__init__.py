"""Memory on this host as a cell meets it: was a server killed for memory (`oom`, from the
kernel's log and counters, `kernel_log`, or macOS's jetsam lines, `jetsam`), and the hard limit a
server may run under (`memlimit`, `--memory-limit`)."""
