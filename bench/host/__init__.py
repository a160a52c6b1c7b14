"""The machine and its limits: hardware facts, CPU pinning, memory limits, OOM evidence, resource sampling."""
