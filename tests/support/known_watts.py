"""A power source of known watts for a cell run in a pytest subprocess (`-p tests.support.known_watts`):
CPU packages drawing exactly WATTS, read as RAPL is read (a counter of joules, stamped at its read),
in place of the machine's RAPL, which a VM has not."""

from __future__ import annotations

import time

from bench.host import resources

WATTS = 20.0


class KnownWatts:
    """Rapl's interface: a counter that grows by WATTS joules a second."""

    def __bool__(self) -> bool:
        return True

    def read(self) -> dict[str, float]:
        wall = time.time()
        return {"joules": WATTS * wall, "wall": wall}


def pytest_configure(config) -> None:
    resources.Rapl = KnownWatts  # type: ignore[assignment,misc]
