"""UCX transport table: which UCX_TLS lists can carry KV between two pods."""

from __future__ import annotations

from pathlib import Path

import pytest

from disagg_contract import platform_file, platforms, ucx


@pytest.mark.parametrize(
    "tls",
    ["cma,self", "sm", "posix,sysv,self", "cuda_ipc,cuda_copy,self", "xpmem,knem", "shm,mm,self"],
)
def test_host_only_lists(tls: str) -> None:
    assert ucx.host_only(tls)


@pytest.mark.parametrize(
    "tls",
    [
        "tcp",
        "tcp,self",
        "rc,cma,self",  # a network transport beside local ones: UCX uses what reaches
        "ud_x,sm",
        "dc_x",
        "ib",
        "rdmacm,self",
        "all",
        "^tcp",  # an exclusion keeps every other transport
        "^cma,sm",
        "self,frobnicate",  # unknown: maybe a network transport of a newer UCX
        "",
    ],
)
def test_lists_that_may_reach_another_pod(tls: str) -> None:
    assert not ucx.host_only(tls)


def test_every_reach_is_known() -> None:
    assert {t.reach for t in ucx.TRANSPORTS.values()} == {ucx.PROCESS, ucx.HOST, ucx.NETWORK}


def test_derived_transports_reach_the_network() -> None:
    for p in platforms.BUILTIN:
        assert not ucx.host_only(p.ucx_tls), p.name


def test_the_platforms_file_refuses_the_privileged_transports_of_the_table() -> None:
    assert ucx.needs_privilege() == platform_file.UNSAFE_TLS
    assert {"cma", "sm", "cuda_ipc", "all"} <= ucx.needs_privilege()
    assert not {"tcp", "rc", "self", "cuda_copy"} & ucx.needs_privilege()


def test_the_markdown_table_lists_every_transport() -> None:
    table = ucx.markdown_table()
    for name in ucx.TRANSPORTS:
        assert f"`{name}`" in table


@pytest.mark.parametrize(
    ("tls", "tcp"),
    [
        ("tcp,self", True),
        ("rc,ud,tcp,cuda_copy,self", True),
        ("all", True),
        ("^cma,sm", True),  # everything but shared memory: tcp stays in
        ("^tcp", False),
        ("^cma,tcp", False),
        ("rc,ud,cuda_copy,self", False),
        ("cma,self", False),
    ],
)
def test_which_lists_carry_tcp(tls: str, tcp: bool) -> None:
    assert ucx.carries_tcp(tls) is tcp


def test_the_tcp_settings_table_is_in_the_derivation_doc() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "derivation.md").read_text()
    assert ucx.tcp_markdown_table() in doc, (
        "docs/derivation.md is stale: paste disagg_contract.ucx.tcp_markdown_table() into it"
    )
