"""The local kubelet's pod network: two kubelets on one host never share one."""

from __future__ import annotations

from pathlib import Path

import pytest

from disagg_tools.local.kubelet import network


def test_two_kubelets_on_one_host_hold_different_pod_networks_and_a_freed_one_is_taken_again(
    tmp_path: Path,
) -> None:
    with network.leased(tmp_path) as first:
        with network.leased(tmp_path) as second:
            assert (first, second) == ("127.0.1.", "127.0.2.")
        with network.leased(tmp_path) as again:
            assert again == "127.0.2."


def test_every_network_held_is_refused_naming_the_lock_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(network, "LAST", 1)
    held = network.leased(tmp_path)
    with held, pytest.raises(RuntimeError, match="disagg-pod-network"), network.leased(tmp_path):
        pass
