"""WorkerConfig: env round trip and start-up errors that name the variable."""

from __future__ import annotations

import pytest

from disagg_contract.config import ConfigError, WorkerConfig


def test_env_round_trip() -> None:
    cfg = WorkerConfig(
        role="decode",
        device="cuda",
        peer_device="cpu",
        backends=["UCX"],
        nixl_threads=2,
        ucx_env={"UCX_RNDV_THRESH": "8k"},
        side_channel_port=0,
    )
    assert WorkerConfig.from_env(cfg.to_env()) == cfg
    assert cfg.buffer_device == "cpu" and cfg.needs_staging and cfg.memory_type == "DRAM"


def test_cpu_worker_registers_dram_without_staging() -> None:
    cfg = WorkerConfig(role="prefill")
    assert (cfg.buffer_device, cfg.needs_staging, cfg.memory_type) == ("cpu", False, "DRAM")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DISAGG_KV_BUFFER_DEVICE": "cuda"}, "DISAGG_KV_BUFFER_DEVICE: .*allowed: cpu"),
        ({"DISAGG_DEVICE": "npu"}, "DISAGG_DEVICE: unknown device 'npu'"),
        (
            {"DISAGG_BACKENDS": "GDS"},
            r"DISAGG_BACKENDS: lists no NIXL backend that can reach another pod.*\(found: GDS\)",
        ),
        ({"DISAGG_TYPO": "1"}, "DISAGG_TYPO: unknown setting"),
        (
            {"DISAGG_UCX_ENV": '{"PATH": "/tmp"}'},
            "^DISAGG_UCX_ENV: key 'PATH' is not a UCX setting; use UCX_\\* names only$",
        ),
        ({"DISAGG_TP_RANK": "2"}, "DISAGG_TP_RANK: 2 must be below DISAGG_TP_SIZE 1"),
        (
            {"DISAGG_BLOCK_LEASE_S": "5", "DISAGG_TRANSFER_DEADLINE_S": "10"},
            "DISAGG_BLOCK_LEASE_S: 5 must exceed DISAGG_TRANSFER_DEADLINE_S 10",
        ),
    ],
)
def test_invalid_settings_name_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        WorkerConfig.from_env({"DISAGG_ROLE": "decode", **env})
