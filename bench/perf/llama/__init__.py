"""`cellbench perf compare --llama-server`: the clients on a real llama-server (`compare`), and the
server's own account of each run, read from its log (`log`)."""
