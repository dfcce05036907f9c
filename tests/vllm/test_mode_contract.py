"""The installed vLLM against its row of the transfer-mode table (engines/vllm/modes.py):
vLLM's own classes are the judge (``make test-vllm``).

The connector each mode renders is registered in vLLM's KVConnectorFactory, and pull's
NixlConnector is the class NixlPullConnector; the handshake hash takes the transfer mode
where the row says vLLM tells the modes apart (and then two modes hash differently); the
pull scheduler tells decode its prefill's pipeline stages where the row lets a pull
prefill run them; the base worker refuses decode stages; every connector of the row
parses in vLLM's KVTransferConfig as render writes it.
"""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from disagg_operator.engines.vllm import contract as profiles
from disagg_operator.engines.vllm import modes

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def row() -> modes.ModeRow:
    """The mode row of the installed vLLM (imported here, never at collection)."""
    import vllm

    return modes.mode_row(profiles.parse_version(vllm.__version__))


def test_each_modes_connector_is_registered(row: modes.ModeRow) -> None:
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory

    for mode in row.modes:
        cls = KVConnectorFactory.get_connector_class_by_name(row.connector(mode))
        assert cls.__name__ == ("NixlPushConnector" if mode == modes.PUSH else "NixlPullConnector")
    if modes.PUSH not in row.modes:  # an older release: no push class to render
        assert "NixlPushConnector" not in KVConnectorFactory._registry


def test_the_handshake_hash_tells_the_modes_apart_where_the_row_says(row: modes.ModeRow) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import metadata

    takes_mode = (
        "transfer_mode" in inspect.signature(metadata.compute_nixl_compatibility_hash).parameters
    )
    assert takes_mode == row.mode_in_hash


def test_a_pull_prefill_reports_its_stages_where_the_row_allows_them(row: modes.ModeRow) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import pull_scheduler

    source = inspect.getsource(pull_scheduler)
    assert ("pp_size=" in source) == (modes.PULL in row.prefill_stages)


def test_the_base_worker_refuses_decode_stages(row: modes.ModeRow) -> None:
    from vllm.distributed.kv_transfer.kv_connector.v1.nixl import base_worker

    source = inspect.getsource(base_worker.NixlBaseConnectorWorker.__init__)
    start = source.index("if self.pp_size > 1:")
    assert 'kv_role == "kv_consumer"' in source[start:]
    assert "does not support" in source[start:]


@pytest.mark.parametrize("mode", [modes.PULL, modes.PUSH])
def test_the_rendered_connector_parses_in_vllms_config(row: modes.ModeRow, mode: str) -> None:
    from vllm.config import KVTransferConfig

    from disagg_operator.render.objects import render
    from tests.operator.builders import body, by_kind

    if mode not in row.modes:
        pytest.skip(f"{mode}: not in this vLLM")
    obj = body(engine="vllm", kvTransfer={"mode": mode})
    (pod, *_) = by_kind(render(obj, hmac_key="k"), "Pod")
    command: list[str] = pod["spec"]["containers"][0]["command"]
    given: dict[str, Any] = json.loads(command[command.index("--kv-transfer-config") + 1])
    config = KVTransferConfig(**given)
    assert config.kv_connector == row.connector(mode)
