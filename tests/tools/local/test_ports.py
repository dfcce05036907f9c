"""The ports `disagg up` hands to engines that cannot bind port 0 themselves (vLLM): free,
each once, and below the kernel's ephemeral range, where no later bind(0) lands (a vLLM
engine core once took its API server's port that way)."""

from __future__ import annotations

import itertools
import socket
from pathlib import Path

from disagg_tools.local.serving import LOWEST_PORT, ephemeral_low, free_ports


def test_ports_are_free_distinct_and_below_the_ephemeral_range() -> None:
    low = ephemeral_low()
    ports = list(itertools.islice(free_ports(), 50))
    assert len(set(ports)) == 50
    assert all(LOWEST_PORT <= p < low for p in ports), ports
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[0]))  # still free: nothing holds it


def test_a_taken_port_is_never_handed_out() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", next(free_ports())))
        held.listen()
        taken = held.getsockname()[1]
        # a range of two ports, one of them held: only the other comes out
        assert list(itertools.islice(free_ports(low=taken + 2, lowest=taken), 1)) == [taken + 1]


def test_the_range_is_read_from_the_kernel(tmp_path: Path) -> None:
    found = tmp_path / "ip_local_port_range"
    found.write_text("40000\t60999\n")
    assert ephemeral_low(found) == 40000
    assert ephemeral_low(tmp_path / "missing") == 32768
