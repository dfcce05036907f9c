"""The local kubelet's pod network: two kubelets on one host never share one."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import subprocess
import sys
import tempfile
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


def _lease_twice(folder: str) -> tuple[str, str]:
    with network.leased(Path(folder)) as net, network.leased(Path(folder)) as other:
        return net, other


def test_a_lock_file_another_user_made_is_locked_read_only(tmp_path: Path) -> None:
    """The first run on a host (as root, say) leaves its lock files; a later user's kubelet
    cannot write them but still takes and holds the network. As root, the later user is
    nobody (a forked child that drops to uid 65534, in a folder it can reach); otherwise, the
    lock file is made read-only for this user."""
    if os.geteuid() != 0:
        with network.leased(tmp_path):
            pass
        (tmp_path / "disagg-pod-network-127.0.1.lock").chmod(0o444)
        assert _lease_twice(str(tmp_path)) == ("127.0.1.", "127.0.2.")
        return
    with tempfile.TemporaryDirectory(dir="/tmp") as shared:
        os.chmod(shared, 0o1777)  # as the temp folder is
        with network.leased(Path(shared)):
            pass
        with concurrent.futures.ProcessPoolExecutor(
            1, mp_context=multiprocessing.get_context("fork"), initializer=os.setuid,
            initargs=(65534,),
        ) as other_user:  # fmt: skip
            leased = other_user.submit(_lease_twice, shared).result(30)
    assert leased == ("127.0.1.", "127.0.2.")


def test_addresses_go_round_the_range_as_cni_host_local_does() -> None:
    """containernetworking/plugins v1.9.1 host-local: the next free address after the last
    one reserved, so an address a deleted pod freed is not handed out again at once."""
    assert network.next_host(taken=(), last=None) == 2
    assert network.next_host(taken={2, 3}, last=3) == 4
    assert network.next_host(taken={3}, last=3) == 4  # .2 was freed: still not the next
    assert network.next_host(taken={4, 5}, last=254) == 2  # round the range
    assert network.next_host(taken={2, 3, 254}, last=253) == 4


def test_a_full_network_is_refused_by_count() -> None:
    with pytest.raises(RuntimeError, match="all 253"):
        network.next_host(taken=set(network.HOSTS), last=7)


def test_a_local_runs_pods_take_addresses_from_a_network_its_process_holds() -> None:
    """`disagg up`'s pods: one address per pod name, none shared between two runs of one
    process, all in a network no kubelet on the host can take while the process lives."""
    first, second = network.Addresses(), network.Addresses()
    a, b = first("p-0"), first("d-0")
    assert first("p-0") == a and len({a, b, second("p-0")}) == 3
    prefix = network.process_network()
    assert all(x.startswith(prefix) for x in (a, b, second("p-0")))
    with network.leased() as other:  # the process's own network is held
        assert other != prefix


def test_a_run_goes_on_from_the_address_the_networks_last_holder_handed_out(
    tmp_path: Path,
) -> None:
    """As host-local's last_reserved_ip: a process that takes the network after another
    does not hand out the addresses the other's pods had (they may still be draining)."""
    code = (
        "import sys; from pathlib import Path; from disagg_tools.local.kubelet import network;"
        "at = network.Addresses(Path(sys.argv[1])); print(at('a'), at('b'))"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs == [["127.0.1.2", "127.0.1.3"], ["127.0.1.4", "127.0.1.5"]]
