"""No network at run time: hub libraries are set offline and any outbound socket is refused.

The guard uses an audit hook (PEP 578), which cannot be removed once installed, so no library
in a pipeline job can open a network connection or send a datagram by accident: ``connect`` to
anything but a local (AF_UNIX) socket, name lookups, and ``sendto``/``sendmsg`` to a non-loopback
address raise :class:`NetworkAccessError`. A ``fork`` child inherits the hook; every other Python
child (``subprocess``, multiprocessing ``spawn``/``forkserver``) gets it at start-up from
``workflow/sitecustomize.py``, which installs it when ``ICMLREPRO_NETWORK_GUARD=1``: the rules
export that variable with :func:`job_environment`, and a guarded process exports it to its
children too.

Below Python, when the kernel lets an unprivileged user create namespaces, every job runs in a network
namespace of its own: ``python -m icmlrepro stage|report`` re-executes itself under ``unshare -rn``
(:func:`enter_network_namespace`) before it imports anything heavy. The namespace has no interface but a
loopback that is down, so nothing in the job reaches the network, whatever the language: C libraries,
``python -S`` children and children with a cleaned environment included. Where that is not permitted
(some clusters), the audit hook is the barrier and those escapes remain; each job's log says which barrier
it ran behind (:func:`network_barrier`). It is done in the stage runner, not in the rules' shell commands,
so that the commands (which Snakemake tracks) do not depend on the machine.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

GUARD_VAR = "ICMLREPRO_NETWORK_GUARD"
WORKFLOW_DIR = Path(__file__).resolve().parents[2]  # holds the icmlrepro package and sitecustomize.py

# "0" switches the job's own network namespace off; "inside" marks a process (and its children) already in one.
NETNS_VAR = "ICMLREPRO_NETNS"


def _usable_unshare() -> str | None:
    """The ``unshare`` binary if this machine lets this user create a network namespace with it (asked by
    trying ``unshare -rn true``), else None."""
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-rn", "true"], capture_output=True).returncode == 0:
        return unshare
    return None


def netns_permitted() -> bool:
    """Whether this machine lets this user create a network namespace (``unshare -rn``)."""
    return _usable_unshare() is not None


def enter_network_namespace(args: list[str]) -> None:
    """Re-execute ``python *args`` in a network namespace of its own when permitted; return otherwise.

    Called first thing by ``python -m icmlrepro stage|report``; the process keeps its PID (``exec``), so
    Snakemake's benchmark and signals still reach it. Nothing is lost where namespaces are refused: the
    process goes on behind the audit hook alone, and says so in its log."""
    if os.environ.get(NETNS_VAR) in ("0", "inside"):
        return
    unshare = _usable_unshare()
    if unshare is None:
        return
    os.environ[NETNS_VAR] = "inside"
    os.execv(unshare, [unshare, "-rn", sys.executable, *args])

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


def _prepend_path(entry: str, current: str | None) -> str:
    parts = [p for p in (current or "").split(os.pathsep) if p and p != entry]
    return os.pathsep.join([entry, *parts])


def job_environment(root: str | os.PathLike, environ: dict | None = None) -> dict[str, str]:
    """The variables every job of the checkout ``root`` runs with (set once, in common.smk).

    Hub libraries offline and headless plots; the guard switch for every Python child; and the
    checkout's own code: ``PYTHONPATH`` starts with ``root/workflow`` (so ``python -m icmlrepro``
    imports this checkout's package, not whichever one the environment's editable install points
    to) and ``ICMLREPRO_ROOT`` names ``root`` (claims, schemas and the commit in the provenance).
    """
    environ = os.environ if environ is None else environ
    root = Path(root).resolve()
    return {
        **OFFLINE_ENV,
        GUARD_VAR: "1",
        "ICMLREPRO_ROOT": str(root),
        "PYTHONPATH": _prepend_path(str(root / "workflow"), environ.get("PYTHONPATH")),
    }


def set_offline_env() -> None:
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def _loopback(address) -> bool:
    """Whether a socket address (``(host, port, ...)``) is this machine's loopback interface."""
    if not isinstance(address, tuple) or not address:
        return False
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


# Audit events of the resolver (gethostbyname_ex raises socket.gethostbyname); getservbyname/port and
# gethostname read local files only.
NAME_LOOKUPS = frozenset({"socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr",
                          "socket.getnameinfo"})


def network_barrier() -> str:
    """Which barrier this process runs behind, for its log: a network namespace without interfaces other than
    loopback (nothing reaches the network) or only the audit hook (Python-level: C code can still connect)."""
    try:
        names = [name for _, name in socket.if_nameindex()]
    except OSError:
        names = []
    if names and all(name == "lo" for name in names):
        return "own network namespace (loopback only) and the Python audit hook"
    return ("Python audit hook only (no network namespace here: unprivileged `unshare -rn` is not permitted "
            "or ICMLREPRO_NETNS=0); C-level sockets and children started without the guard are not covered")


def _audit(event: str, args: tuple) -> None:
    if event == "socket.connect":
        sock, address = args[0], args[1]
        if getattr(sock, "family", None) == socket.AF_UNIX:
            return
        raise NetworkAccessError(f"network access refused in a pipeline job: connect to {address!r}")
    if event in NAME_LOOKUPS:
        raise NetworkAccessError(f"network access refused in a pipeline job: name lookup of {args[0]!r}")
    if event in ("socket.sendto", "socket.sendmsg"):
        sock, address = args[0], args[1]
        if address is None or getattr(sock, "family", None) == socket.AF_UNIX or _loopback(address):
            return  # a connected socket (its connect was checked), a local socket, or loopback
        raise NetworkAccessError(
            f"network access refused in a pipeline job: {event.split('.')[1]} to {address!r}")


def install_network_guard() -> None:
    """Refuse network access for the rest of this process and in every Python child it starts."""
    global _installed
    set_offline_env()
    os.environ[GUARD_VAR] = "1"
    os.environ["PYTHONPATH"] = _prepend_path(str(WORKFLOW_DIR), os.environ.get("PYTHONPATH"))
    if not _installed:
        sys.addaudithook(_audit)
        _installed = True
