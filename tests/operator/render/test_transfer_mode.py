"""Which way the reference engine's KV moves: decode's READ, or the prefill's push (a WRITE
on decode's claim), derived from the pools' transport and overridable by a role's env."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.render import objects as render
from tests.operator.builders import body, by_kind, env_of, role

MODE = "DISAGG_TRANSFER_MODE"


def _modes(obj: dict[str, Any]) -> dict[str, str]:
    out = {}
    for pod in by_kind(render.render(obj, hmac_key="k"), "Pod"):
        engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
        # absent: the worker's default, read
        out[pod["metadata"]["labels"]["disagg.dev/role"]] = env_of(engine).get(MODE, "absent")
    return out


def test_tcp_pools_push() -> None:
    assert _modes(body()) == {"prefill": "push", "decode": "push"}


@pytest.mark.parametrize(
    "kv",
    [
        {"ucxTls": "rc,ud,self"},  # no tcp: a READ is one-sided RDMA
        {"backends": ["LIBFABRIC"]},
        {
            "backends": ["LIBFABRIC"],
            "rdma": {"transport": "libfabric", "resources": {"vpc.amazonaws.com/efa": 1}},
        },
    ],
)
def test_other_transports_read(kv: dict[str, Any]) -> None:
    assert _modes(body(kvTransfer=kv)) == {"prefill": "absent", "decode": "absent"}


def test_a_roles_env_wins_and_is_not_refused() -> None:
    forced = [{"name": MODE, "value": "read"}]
    obj = body(decode=role(env=forced))
    assert _modes(obj) == {"prefill": "push", "decode": "read"}
