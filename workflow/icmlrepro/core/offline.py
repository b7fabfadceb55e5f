"""No network at run time: hub libraries are set offline and any outbound socket is refused.

The guard uses an audit hook (PEP 578), which cannot be removed once installed, so no library
in a pipeline job can open a network connection by accident; local (AF_UNIX) sockets, which
multiprocessing uses, stay allowed.
"""

from __future__ import annotations

import os
import socket
import sys

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "MPLBACKEND": "Agg",
}


class NetworkAccessError(RuntimeError):
    """A pipeline job tried to reach the network."""


_installed = False


def set_offline_env() -> None:
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def _audit(event: str, args: tuple) -> None:
    if event == "socket.connect":
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) == socket.AF_UNIX:
            return
        raise NetworkAccessError(f"network access refused in a pipeline job: connect to {address!r}")
    if event == "socket.getaddrinfo":
        raise NetworkAccessError(f"network access refused in a pipeline job: name lookup of {args[0]!r}")


def install_network_guard() -> None:
    """Refuse outbound connections and name lookups for the rest of this process."""
    global _installed
    set_offline_env()
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
