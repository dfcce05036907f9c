"""The CPU KV tier's ``--kv-transfer-config`` judged by the installed vLLM's own classes,
and why ``--config`` is refused in args, judged by its own parser.

GPU-only in reality: vLLM's offloading worker runs on CUDA-alike and XPU devices alone,
and none is here. So nothing is served: the rendered JSON goes through KVTransferConfig,
MultiConnector's own construction of each child's config (``_get_connector_classes_and_
configs``: the child classes it would instantiate) and OffloadingConnector's CPU spec
(``CPUOffloadingSpec``, which reads ``cpu_bytes_to_use`` and sizes the tier), none of
which needs a device; the connectors themselves are never instantiated.
"""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.render.objects import render

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
GIB = 1024**3


def _example() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "cuda-cpu-tier.yaml").read_text())
    body["metadata"].update(namespace="default", uid="u")
    return body


def _rendered(body: dict[str, Any]) -> dict[str, tuple[list[str], str]]:
    """Each pool's first pod: (its argv, its --kv-transfer-config)."""
    out: dict[str, tuple[list[str], str]] = {}
    for pod in render(body, hmac_key="k" * 32):
        if pod["kind"] == "Pod":
            argv = pod["spec"]["containers"][0]["command"]
            role = pod["metadata"]["labels"]["disagg.dev/role"]
            out.setdefault(role, (argv, argv[argv.index("--kv-transfer-config") + 1]))
    return out


def _children(raw: str) -> tuple[Any, list[tuple[type, Any]]]:
    """The top-level KVTransferConfig and (class, KVTransferConfig) of each child, as
    MultiConnector builds them."""
    import pydantic
    from vllm.config.kv_transfer import KVTransferConfig
    from vllm.distributed.kv_transfer.kv_connector.v1.multi_connector import MultiConnector

    top = pydantic.TypeAdapter(KVTransferConfig).validate_json(raw)
    built = MultiConnector._get_connector_classes_and_configs(
        types.SimpleNamespace(kv_transfer_config=top)
    )
    return top, [(cls, config.kv_transfer_config) for cls, config in built]


def test_gpu_only_in_reality_the_tier_config_parses_into_vllm_s_own_children() -> None:
    for role, (_, raw) in _rendered(_example()).items():
        top, ((nixl_cls, nixl), (offload_cls, offload)) = _children(raw)
        assert top.kv_connector == "MultiConnector"
        assert top.is_kv_producer == (role == "prefill")  # the scheduler's reading
        assert top.kv_load_failure_policy == "recompute"  # the scheduler reads it here
        # from 0.24 the name NixlConnector registers NixlPullConnector (an alias)
        assert nixl.kv_connector == "NixlConnector"
        assert nixl_cls.__name__ in ("NixlConnector", "NixlPullConnector")
        assert offload_cls.__name__ == "OffloadingConnector"
        assert nixl.engine_id == offload.engine_id == top.engine_id  # the one field passed
        assert nixl.kv_role == top.kv_role and nixl.kv_buffer_device == "cuda"
        assert nixl.kv_load_failure_policy == "recompute"
        assert nixl.kv_connector_extra_config["kv_lease_duration"] == 30
        assert offload.kv_role == "kv_both"
        assert offload.kv_connector_extra_config["cpu_bytes_to_use"] == 64 * GIB


def test_gpu_only_in_reality_children_inherit_nothing_from_the_top_level() -> None:
    """Why every field is rendered in each child: with them at the top only, vLLM's
    children get its defaults (the platform's buffer device, the fail policy)."""
    _, raw = _rendered(_example())["decode"]
    config = json.loads(raw)
    nixl = config["kv_connector_extra_config"]["connectors"][0]
    for key in ("kv_buffer_device", "kv_load_failure_policy"):
        del nixl[key]
    _, ((_, child), _) = _children(json.dumps(config))
    assert (config["kv_buffer_device"], config["kv_load_failure_policy"]) == ("cuda", "recompute")
    assert child.kv_buffer_device != "cuda"  # this host's platform: cpu
    assert child.kv_load_failure_policy == "fail"


def _offloading_spec(cpu_bytes: int, world_size: int, block_bytes: int) -> Any:
    from vllm.v1.kv_offload import config as c
    from vllm.v1.kv_offload.cpu.spec import CPUOffloadingSpec

    parallel = c.OffloadingParallelConfig(
        rank=0,
        world_size=world_size,
        tp_size=world_size,
        pp_size=1,
        pcp_size=1,
        dcp_size=1,
        data_parallel_index=0,
        data_parallel_size=1,
        data_parallel_rank_local=None,
        is_parallelism_agnostic=False,
    )
    config = c.OffloadingConfig(
        groups=(c.OffloadingGroupConfig(tokens_per_block=16, layer_names=("l0",), group_id=0),),
        worker_kv_bytes_per_block=block_bytes,
        enable_kv_cache_events=False,
        extra_config={"cpu_bytes_to_use": cpu_bytes},
        engine_id="e",
        model=c.OffloadingModelConfig(name="m", dtype="bfloat16"),
        cache=c.OffloadingCacheConfig(tokens_per_hash=16, blocks_per_chunk=1),
        parallel=parallel,
    )
    return CPUOffloadingSpec(config)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_gpu_only_in_reality_cpu_bytes_to_use_is_the_engine_s_over_all_its_ranks(tp: int) -> None:
    """The rendered per-engine bytes hold the same blocks whatever the TP: one chunk holds
    a block of every rank (Llama-3.1-8B: 2 MiB a 16-token block over 32 layers, 1/tp of it
    on each rank), so the tier is the engine's, not each rank's."""
    _, raw = _rendered(_example())["prefill"]
    cpu_bytes = json.loads(raw)["kv_connector_extra_config"]["connectors"][1][
        "kv_connector_extra_config"
    ]["cpu_bytes_to_use"]
    spec = _offloading_spec(cpu_bytes, tp, 2 * 1024**2 // tp)
    assert spec.num_chunks == 64 * GIB // (2 * 1024**2)  # 32768 blocks: 512k tokens


def test_a_data_parallel_pod_gives_each_engine_its_share(serve_parser: Any) -> None:
    """vLLM's parser reads the engines the operator split the tier among."""
    body = _example()
    body["spec"]["decode"]["args"] = ["--data-parallel-size", "2"]
    body["spec"]["decode"]["resources"]["limits"].update({"nvidia.com/gpu": 2, "memory": "80Gi"})
    argv, raw = _rendered(body)["decode"]
    _, engine_args = serve_parser.parse([*argv, *body["spec"]["decode"]["args"]])
    (_, offload) = _children(raw)[1][1]
    per_engine = offload.kv_connector_extra_config["cpu_bytes_to_use"]
    assert per_engine * engine_args.data_parallel_size == 64 * GIB


def test_vllm_takes_what_the_command_line_leaves_from_a_config_file(
    serve_parser: Any, tmp_path: Path
) -> None:
    """Why the operator refuses --config in args: vLLM 0.32's FlexibleArgumentParser puts
    the file's flags before the command line's, so a rendered flag wins over the file, and
    a flag the operator never renders comes from it unchecked: --kv-offloading-size, which
    makes VllmConfig replace the P/D connector."""
    argv, _ = _rendered(_example())["prefill"]
    file = tmp_path / "serve.yaml"
    offload = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}
    file.write_text(yaml.safe_dump({"kv-offloading-size": 8, "kv-transfer-config": offload}))
    _, engine_args = serve_parser.parse([*argv, "--config", str(file)])
    assert engine_args.kv_transfer_config.kv_connector == "MultiConnector"  # the command's
    assert engine_args.kv_offloading_size == 8  # the file's, which nothing checked
    _, plain = serve_parser.parse(argv)
    assert plain.kv_offloading_size is None
