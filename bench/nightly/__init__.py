"""The nightly job across machines: machines.yaml, its tracking issues, its nightly/<date> branch."""
