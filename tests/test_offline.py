"""Pipeline jobs cannot reach the network: the guard refuses connections and name lookups."""

import subprocess
import sys

CHILD = """
import socket
from icmlrepro.core.offline import NetworkAccessError, install_network_guard
install_network_guard()
import os
assert os.environ["HF_HUB_OFFLINE"] == "1"
for attempt in (lambda: socket.create_connection(("198.51.100.1", 80), timeout=1),
                lambda: socket.getaddrinfo("example.org", 443)):
    try:
        attempt()
    except NetworkAccessError:
        continue
    raise SystemExit("network access was not refused")
a, b = socket.socketpair()  # local sockets stay allowed
a.sendall(b"x"); assert b.recv(1) == b"x"
print("refused")
"""


def test_guard_refuses_network_in_a_job_process():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused" in out.stdout
