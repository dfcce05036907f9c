"""spec.kvTransfer.mode as render writes it: the reference engine's DISAGG_TRANSFER_MODE
(the worker's push, a WRITE on decode's claim; nothing for pull, the worker's default read)
and vLLM's kv_connector, on both pools; a role's own DISAGG_TRANSFER_MODE is refused, since
it would pair a push pool with a pull one."""

from __future__ import annotations

import json
from typing import Any

import pytest

from disagg_operator.engines.settings import DEFAULT
from disagg_operator.render import kvkey
from disagg_operator.render import objects as render
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, by_kind, env_of, role, vllm_gpu_cpu

MODE = "DISAGG_TRANSFER_MODE"


def _engines(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for pod in by_kind(render.render(obj, hmac_key="k"), "Pod"):
        engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
        out[pod["metadata"]["labels"]["disagg.dev/role"]] = engine
    return out


def _modes(obj: dict[str, Any]) -> dict[str, str]:
    return {r: env_of(c).get(MODE, "absent") for r, c in _engines(obj).items()}


def _connectors(obj: dict[str, Any]) -> dict[str, str]:
    out = {}
    for r, c in _engines(obj).items():
        command = c["command"] + c.get("args", [])
        config = json.loads(command[command.index("--kv-transfer-config") + 1])
        out[r] = config["kv_connector"]
    return out


def test_pull_renders_no_mode() -> None:
    assert _modes(body()) == {"prefill": "absent", "decode": "absent"}
    assert _modes(body(kvTransfer={"mode": "pull"})) == {"prefill": "absent", "decode": "absent"}


def test_push_renders_the_workers_push_on_both_pools() -> None:
    assert _modes(body(kvTransfer={"mode": "push"})) == {"prefill": "push", "decode": "push"}


@pytest.mark.parametrize("value", ["push", "read"])
def test_a_roles_own_transfer_mode_is_refused_naming_the_field(value: str) -> None:
    obj = body(decode=role(env=[{"name": MODE, "value": value}]))
    (problem,) = validation.parse(obj)[1]
    assert problem.field == "spec.decode.env[0]"
    assert "spec.kvTransfer.mode" in problem.message


@pytest.mark.parametrize(
    ("mode", "connector"), [(None, "NixlConnector"), ("pull", "NixlConnector"),
                            ("push", "NixlPushConnector")]
)  # fmt: skip
def test_vllm_renders_the_modes_connector_on_both_pools(mode: str | None, connector: str) -> None:
    obj = vllm_gpu_cpu()
    if mode is not None:
        obj["spec"]["kvTransfer"] = {"mode": mode}
    assert _connectors(obj) == {"prefill": connector, "decode": connector}


def _key(obj: dict[str, Any]) -> dict[str, Any]:
    dd, problems = validation.parse(obj)
    assert dd is not None and not problems, problems
    return kvkey.kv_key(dd.spec, DEFAULT)


@pytest.mark.parametrize("engine", ["reference", "vllm"])
def test_push_is_a_new_kv_revision_and_pull_keeps_todays_key(engine: str) -> None:
    """A push pool never transfers with a pull one, so a mode change rolls out a new KV
    revision (never a mixed pair); pull, the default, leaves the key as it was before the
    field existed, so deployments without it keep their revision."""
    plain = _key(body(engine=engine))
    assert "mode" not in plain
    assert _key(body(engine=engine, kvTransfer={"mode": "pull"})) == plain
    push = _key(body(engine=engine, kvTransfer={"mode": "push"}))
    assert push == {**plain, "mode": "push"}
    assert kvkey.digest(push) != kvkey.digest(plain)
