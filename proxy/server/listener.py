"""The listening sockets: bound once, by the process that starts, and handed to the workers.

Without ``SO_REUSEPORT``: a port another server (a second toolshim included) already listens on
fails here at once, with one line that names the flag to change, instead of the kernel quietly
splitting connections between the two. Workers inherit these sockets (``multiprocessing`` passes
them to spawned children), so a worker restart cannot lose the port to someone else.
"""

from __future__ import annotations

import errno
import socket

BACKLOG = 1024  # connections the kernel queues before a worker accepts them


def bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for ``host:port``: one per address the name resolves to (``localhost``:
    IPv4 and IPv6). Raises ``OSError`` (see ``describe``) and leaves nothing open."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    seen: set[tuple[int, str]] = set()
    try:
        for family, kind, proto, _name, address in infos:
            key = (int(family), str(address[0]))
            if key in seen or (port == 0 and sockets):  # port 0: one socket, one port
                continue
            seen.add(key)
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # old connections in TIME_WAIT are fine
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def describe(exc: OSError, host: str, port: int) -> str:
    """One line for the operator: why ``bind`` failed and which setting to change."""
    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use; choose another with --port (TOOLSHIM_PORT)"
    if exc.errno == errno.EACCES:
        return f"no permission to listen on port {port}; choose one above 1023 with --port (TOOLSHIM_PORT)"
    reason = exc.strerror or str(exc)
    return f"cannot listen on {host}:{port} ({reason}); check --host (TOOLSHIM_HOST)"
