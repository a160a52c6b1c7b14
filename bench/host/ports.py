"""Who holds a TCP port on this machine, and a free one to start a server on."""

from __future__ import annotations

import socket

import psutil


def port_holder(host: str, port: int) -> str | None:
    """Who holds `host:port`, or None when it is free to bind.

    SO_REUSEADDR as servers set it: connections of a stopped server lingering in TIME_WAIT do not
    hold the port, a listening process does.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            return None
        except OSError:
            pass
    for conn in listeners(port):
        if conn.pid:
            try:
                proc = psutil.Process(conn.pid)
                return f"pid {conn.pid} ({' '.join(proc.cmdline())[:120]})"
            except psutil.Error:
                return f"pid {conn.pid}"
    return "an unknown process"


def free_port(host: str = "127.0.0.1") -> int:
    """A port the kernel just handed out as free (another process may still take it first)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def listeners(port: int) -> list:
    """The sockets listening on `port` (psutil connections); empty where they cannot be listed."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return []
    return [c for c in conns if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]


def free_port_run(count: int, host: str = "127.0.0.1", exclude: frozenset[int] = frozenset(),
                  tries: int = 100) -> int:
    """The first of `count` consecutive ports that all bind on `host` now (a router's workers take
    base, base+1, ...); raises OSError when `tries` attempts found none."""
    for _ in range(tries):
        base = free_port(host)
        run = range(base, base + count)
        if base + count <= 65536 and not exclude.intersection(run) and all(_binds(host, p) for p in run):
            return base
    raise OSError(f"no {count} consecutive free ports on {host} in {tries} tries")


def _binds(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
