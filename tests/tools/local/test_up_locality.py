"""`disagg up` of a manifest with transfer locality: its local router gets the rendered
``--transfer-locality`` beside the worker URLs of one host, starts, and reads no zones
(every pod on one host: one zone-less group)."""

from __future__ import annotations

from pathlib import Path

import yaml

from disagg_tools.local.stack import router_settings
from disagg_worker.serve.proxy import app as proxy
from disagg_worker.serve.proxy.config import from_args

ROOT = Path(__file__).resolve().parents[3]


def test_the_local_router_runs_the_example_with_no_zone_source() -> None:
    body = yaml.safe_load((ROOT / "examples" / "transfer-locality.yaml").read_text())
    flags, _ = router_settings(body)
    assert flags[flags.index("--transfer-locality") + 1] == "Required"
    args = proxy._parser().parse_args(
        ["--prefill", "http://127.0.0.1:1", "--decode", "http://127.0.0.1:2", *flags]
    )
    assert from_args(args).locality == "Required"
    assert proxy.zones_of(args, proxy.pools(args)[1]) is None
