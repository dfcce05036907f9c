"""How the reference engine's KV moves: decode's READ unless a role's env asks for the
prefill's push (DISAGG_TRANSFER_MODE=push, a WRITE on decode's claim). The operator renders
no mode (the worker's default, read) and passes a role's own setting through unrefused."""

from __future__ import annotations

from typing import Any

from disagg_operator.render import objects as render
from tests.operator.builders import body, by_kind, env_of, role

MODE = "DISAGG_TRANSFER_MODE"


def _modes(obj: dict[str, Any]) -> dict[str, str]:
    out = {}
    for pod in by_kind(render.render(obj, hmac_key="k"), "Pod"):
        engine = next(c for c in pod["spec"]["containers"] if c["name"] == "engine")
        out[pod["metadata"]["labels"]["disagg.dev/role"]] = env_of(engine).get(MODE, "absent")
    return out


def test_no_mode_is_rendered() -> None:
    assert _modes(body()) == {"prefill": "absent", "decode": "absent"}


def test_a_roles_push_is_passed_through_and_not_refused() -> None:
    obj = body(decode=role(env=[{"name": MODE, "value": "push"}]))
    assert _modes(obj) == {"prefill": "absent", "decode": "push"}
