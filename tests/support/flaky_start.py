"""A server whose first start fails after binding its port, and whose later starts serve.

    python -m tests.support.flaky_start --state FILE --port P [--first drop|http503] [faultserver args]

The first start (FILE absent: it is created) listens on P and meets each of the first `--drops`
connections with `--first`: `drop` resets it (SO_LINGER 0, no byte sent), as a server that bound
its port and then lost its footing does; `http503` answers 503, a server that was alive and
loading. Then it exits with code 1. Every later start is tests/support/faultserver.py with the
remaining arguments (`--mode ok` by default), so a cell that retries the start gets a real server.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys
from pathlib import Path

from tests.support import faultserver

EXIT_CODE = 1
HTTP_503 = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\nConnection: close\r\n\r\nloading"


def fail_first(port: int, first: str, drops: int) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(16)
        print(f"flaky_start: first start, {first} for {drops} connections on port {port}", flush=True)
        for _ in range(drops):
            conn, _ = listener.accept()
            if first == "http503":
                conn.recv(65536)
                conn.sendall(HTTP_503)
            else:  # an RST instead of a FIN: the client sees "connection reset by peer"
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
    print("flaky_start: lost the model store's connection (simulated); exiting", flush=True)
    return EXIT_CODE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.flaky_start")
    parser.add_argument("--state", type=Path, required=True, help="absent: this is the first start")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--first", choices=("drop", "http503"), default="drop")
    parser.add_argument("--drops", type=int, default=3, help="connections met before the first start exits [3]")
    args, rest = parser.parse_known_args(argv)
    if not args.state.exists():
        args.state.write_text("started once\n")
        return fail_first(args.port, args.first, args.drops)
    return faultserver.main(["--port", str(args.port), *rest])


if __name__ == "__main__":
    sys.exit(main())
