"""spec.kvTransfer.mode against each vLLM version's mode row (engines/vllm/modes.py): the
connector it renders, push refused where vLLM has no push connector, and pipeline stages
refused on the pools whose mode cannot transfer them, each naming the field and the fix.

The rows' sources, restated here as data with the wheel file each fact was read in (the
installed vLLM is checked against its row by tests/vllm/test_mode_contract.py)."""

from __future__ import annotations

from typing import Any

import pytest

from disagg_operator.engines.vllm import modes
from disagg_operator.validation import spec as validation
from tests.operator.builders import body, role

# (vLLM version, push connector registered, handshake hash has transfer_mode,
#  a pull prefill sends pp_size, the source) — read in each release's wheel
UPSTREAM = [
    ((0, 22, 1), False, False, False, "kv_connector/factory.py: NixlConnector alone"),
    ((0, 23, 0), False, False, False, "kv_connector/factory.py: NixlConnector alone"),
    ((0, 24, 0), True, False, False, "factory.py registers NixlPullConnector, NixlPushConnector"),
    ((0, 25, 1), True, False, False, "nixl/ has no pipeline stage anywhere"),
    ((0, 26, 0), True, False, False, "nixl/push_scheduler.py request_finished sends pp_size"),
    ((0, 27, 1), True, False, False, "nixl/pull_scheduler.py request_finished: tp_size only"),
    ((0, 28, 0), True, True, False, "nixl/metadata.py compute_nixl_compatibility_hash"),
    ((0, 29, 0), True, True, True, "nixl/pull_scheduler.py request_finished sends pp_size"),
    ((0, 32, 0), True, True, True, "nixl/base_worker.py: kv_consumer with PP > 1 raises"),
    ((0, 33, 0), True, True, True, "nixl/base_worker.py: kv_consumer with PP > 1 raises"),
    ((0, 34, 0), True, True, True, "nixl/base_worker.py: kv_consumer with PP > 1 raises"),
]
# (vLLM version, the kv_connector_extra_config key NixlConnector reads its mode from, the
#  source): kv_connector/factory.py get_connector_class, read in each release's wheel
MODE_KEYS = [
    ((0, 32, 0), None, "factory.py: a registered name is built as named"),
    ((0, 33, 0), None, "factory.py: a registered name is built as named"),
    ((0, 34, 0), "transfer_mode", 'factory.py: NixlConnector → f"Nixl{mode}Connector"'),
]


@pytest.mark.parametrize(("version", "push", "in_hash", "pull_stages", "source"), UPSTREAM)
def test_each_row_says_what_that_release_does(
    version: tuple[int, int, int], push: bool, in_hash: bool, pull_stages: bool, source: str
) -> None:
    row = modes.mode_row(version)
    assert (modes.PUSH in row.modes) == push, source
    assert row.mode_in_hash == in_hash, source
    assert (modes.PULL in row.prefill_stages) == pull_stages, source
    # push stages came with the push connector's PP support, 0.26.0
    assert (modes.PUSH in row.prefill_stages) == (version >= (0, 26, 0)), source


@pytest.mark.parametrize(("version", "key", "source"), MODE_KEYS)
def test_each_row_says_which_extra_key_picks_the_mode(
    version: tuple[int, int, int], key: str | None, source: str
) -> None:
    assert modes.mode_row(version).mode_key == key, source


def _vllm(version: str, mode: str | None = None, **roles: dict[str, Any]) -> dict[str, Any]:
    obj = body(engine="vllm", prefill=roles.get("prefill"), decode=roles.get("decode"))
    obj["spec"]["engine"]["version"] = version
    if mode is not None:
        obj["spec"]["kvTransfer"] = {"mode": mode}
    return obj


def _problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(p.field, p.message) for p in validation.parse(obj)[1]]


def test_push_before_the_push_connector_is_refused_naming_the_version() -> None:
    ((field, message),) = _problems(_vllm("0.23.0", "push"))
    assert field == "spec.kvTransfer.mode"
    assert "NixlPushConnector came in vLLM 0.24.0" in message and "set pull" in message


@pytest.mark.parametrize("version", ["0.24.0", "0.32.0", "0.33.0", "0.34.0"])
def test_push_from_0_24_validates(version: str) -> None:
    assert _problems(_vllm(version, "push")) == []


STAGES = ["--max-num-seqs", "8", "--pipeline-parallel-size", "2"]


@pytest.mark.parametrize(
    ("version", "mode", "refused_since"),
    [
        ("0.25.1", "push", "0.26.0"),
        ("0.23.0", "pull", "0.29.0"),
        ("0.28.0", "pull", "0.29.0"),
        ("0.26.0", "push", None),
        ("0.29.0", "pull", None),
        ("0.32.0", "push", None),
    ],
)
def test_prefill_stages_where_the_modes_connector_transfers_them(
    version: str, mode: str, refused_since: str | None
) -> None:
    obj = _vllm(version, mode, prefill=role(args=list(STAGES)))
    found = _problems(obj)
    if refused_since is None:
        assert found == []
        return
    ((field, message),) = found
    assert field == "spec.prefill.args[2]"
    assert f"vLLM >= {refused_since}" in message and "spec.prefill.tensorParallelSize" in message


@pytest.mark.parametrize(("version", "mode"), [("0.32.0", "pull"), ("0.32.0", "push"),
                                               ("0.22.0", "pull")])  # fmt: skip
def test_decode_stages_are_refused_in_every_mode(version: str, mode: str) -> None:
    obj = _vllm(version, mode, decode=role(args=["-pp=2"]))
    ((field, message),) = _problems(obj)
    assert field == "spec.decode.args[0]" and "spec.decode.tensorParallelSize" in message


def test_a_connector_in_args_is_refused_naming_the_mode() -> None:
    arg = '{"kv_connector":"NixlPushConnector","kv_role":"kv_producer"}'
    obj = _vllm("0.32.0", decode=role(args=["--kv-transfer-config", arg]))
    ((field, message),) = _problems(obj)
    assert field == "spec.decode.args[0]" and "spec.kvTransfer.mode" in message


@pytest.mark.parametrize(("version", "refused"), [("0.33.0", False), ("0.34.0", True)])
@pytest.mark.parametrize("mode", ["pull", "push"])
def test_the_mode_key_in_extra_config_is_refused_where_vllm_reads_it(
    version: str, refused: bool, mode: str
) -> None:
    obj = _vllm(version, mode)
    obj["spec"]["kvTransfer"]["kvConnectorExtraConfig"] = {"transfer_mode": "push"}
    found = _problems(obj)
    if not refused:
        assert found == []
        return
    ((field, message),) = found
    assert field == "spec.kvTransfer.kvConnectorExtraConfig.transfer_mode"
    assert "vLLM >=0.34.0" in message and "set spec.kvTransfer.mode" in message


def test_the_mode_table_lists_every_row() -> None:
    table = modes.mode_table()
    rows = [line for line in table.splitlines()[2:] if line]
    assert len(rows) == len(modes.MODE_ROWS)
    assert "push: NixlPushConnector" in rows[1] and "push" not in rows[0]
