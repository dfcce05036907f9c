"""The operator's configuration value: built once from ``disagg operator``'s flags and the
one key of kopf's memo (controller/config.py, controller/run.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from disagg_operator.controller import run
from disagg_operator.controller.config import OperatorConfig, from_args
from disagg_operator.engines.settings import Settings


def test_the_flags_make_one_config() -> None:
    flags = "-n team-a -n team-* --resync-seconds 7 --canary-seconds 3"
    args = run._parser().parse_args([*flags.split(), "--prometheus-url", "http://prom:9090"])
    settings, key = Settings(canary_image="img"), b"k" * 32
    config = from_args(args, settings=settings, root_key=key)
    assert config == OperatorConfig(
        namespaces=("team-a", "team-*"),
        resync_seconds=7.0,
        canary_seconds=3.0,
        root_key=key,
        settings=settings,
        prometheus_url="http://prom:9090",
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.host = "elsewhere"  # type: ignore[misc]


def test_all_namespaces_and_the_defaults() -> None:
    args = run._parser().parse_args(["-A"])
    config = from_args(args, settings=Settings(), root_key=None)
    assert config.namespaces == ()
    assert (config.resync_seconds, config.canary_seconds) == (600.0, run.CANARY_SECONDS)
    assert config.prometheus_url is None and config.root_key is None


class Stop(Exception):
    pass


async def test_kopf_memo_holds_the_config_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}

    async def spawn_tasks(**kwargs: Any) -> Any:
        seen.update(kwargs)
        raise Stop  # nothing to run: the memo is what this test reads

    monkeypatch.setattr(run.kopf, "spawn_tasks", spawn_tasks)
    config = OperatorConfig(host="http://api", namespaces=("ns",), canary_seconds=2.0)
    with pytest.raises(Stop):
        async with run.running(config):
            pass
    assert dict(seen["memo"]) == {"config": config}
    assert (seen["namespaces"], seen["clusterwide"]) == (("ns",), False)
