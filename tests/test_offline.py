"""Pipeline jobs cannot reach the network: the guard refuses connections, name lookups and datagrams,
in the job's process and in every Python child it starts (subprocess, multiprocessing spawn, fork)."""

import json
import os
import subprocess
import sys

import pytest

from icmlrepro.core.offline import GUARD_VAR, job_environment

from .conftest import ROOT

# Each attempt must raise NetworkAccessError in a guarded process; prints one JSON verdict per attempt.
PROBE = r"""
import json, socket, sys
def refused(attempt):
    try:
        attempt()
    except Exception as exc:
        return type(exc).__name__ == "NetworkAccessError"
    return False
def udp(send):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        send(s)
    finally:
        s.close()
ATTEMPTS = {
    "connect": lambda: socket.create_connection(("198.51.100.1", 80), timeout=1),
    "getaddrinfo": lambda: socket.getaddrinfo("example.org", 443),
    "sendto": lambda: udp(lambda s: s.sendto(b"x", ("198.51.100.1", 53))),
    "sendmsg": lambda: udp(lambda s: s.sendmsg([b"x"], [], 0, ("198.51.100.1", 53))),
}
def probe():
    return {name: refused(a) for name, a in ATTEMPTS.items()}
"""

PARENT = PROBE + r"""
import multiprocessing as mp, subprocess
def child(q):
    q.put(probe())
def in_context(method):
    ctx = mp.get_context(method)
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(q,))
    p.start(); out = q.get(timeout=60); p.join(60)
    return out
if __name__ == "__main__":
    if sys.argv[1] == "install":
        from icmlrepro.core.offline import install_network_guard
        install_network_guard()
    sub = subprocess.run([sys.executable, "-c", PROBE_SRC + "print(json.dumps(probe()))"],
                         capture_output=True, text=True, timeout=60)
    print(json.dumps({"self": probe(), "subprocess": json.loads(sub.stdout or "{}"),
                      "spawn": in_context("spawn"), "fork": in_context("fork")}))
"""


def _run_parent(tmp_path, mode, env):
    script = tmp_path / "parent.py"
    script.write_text(f"PROBE_SRC = {PROBE!r}\n" + PARENT)
    out = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _clean_env():
    return {k: v for k, v in os.environ.items() if k not in (GUARD_VAR, "PYTHONPATH", "ICMLREPRO_ROOT")}


@pytest.mark.parametrize("mode", ["install", "rule_env"])
def test_every_python_child_is_guarded(tmp_path, mode):
    """``install``: a stage installs the guard, its children inherit it. ``rule_env``: a process started
    with only the environment the rules export (no install call) is guarded, and so are its children."""
    env = _clean_env()
    if mode == "rule_env":
        env.update(job_environment(ROOT, env))
    result = _run_parent(tmp_path, mode if mode == "install" else "-", env)
    for where in ("self", "subprocess", "spawn", "fork"):
        assert result[where] == {"connect": True, "getaddrinfo": True, "sendto": True, "sendmsg": True}, \
            (where, result)


LOCAL = r"""
import os, socket
from icmlrepro.core.offline import install_network_guard
install_network_guard()
assert os.environ["HF_HUB_OFFLINE"] == "1"
a, b = socket.socketpair()  # local sockets stay allowed (multiprocessing uses them)
a.sendall(b"x"); assert b.recv(1) == b"x"
for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    rx = socket.socket(family, socket.SOCK_DGRAM); rx.bind((host, 0))
    tx = socket.socket(family, socket.SOCK_DGRAM)
    tx.sendto(b"y", rx.getsockname()); assert rx.recv(1) == b"y"  # loopback datagrams stay allowed
    tx.sendmsg([b"z"], [], 0, rx.getsockname()); assert rx.recv(1) == b"z"
print("local ok")
"""


def test_local_and_loopback_traffic_stays_allowed():
    out = subprocess.run([sys.executable, "-c", LOCAL], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "local ok" in out.stdout
