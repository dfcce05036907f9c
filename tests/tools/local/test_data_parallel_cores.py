"""`disagg up` of a data-parallel vLLM pod: vLLM's CPU worker slices the binding list by
its local DP rank (utils/ompmultiprocessing.py, 0.32.0: the lists of engine d are
``d x world_size .. (d + 1) x world_size``), so the pod's cores are split into one list per
rank of every engine, or each engine would find no list of its own and stop at start."""

from __future__ import annotations

from pathlib import Path

import yaml

from disagg_operator.render.objects import render
from disagg_tools.local.engines import local_engine
from disagg_tools.local.rules.pods import local_pods

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "vllm-cpu-dp2.yaml"
CLAIMS = {"models": "/data/models"}
FILES = {"vllm-cpu-dp2-engine-idle": "/run/cm/engine-idle"}


def test_each_engine_of_a_data_parallel_pod_gets_its_own_core_list() -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"].update(namespace="default", uid="u")
    body["spec"]["decode"]["tensorParallelSize"] = 2  # 2 engines x 2 ranks: four lists
    body["spec"]["decode"]["resources"]["limits"].update(cpu="4", memory="16Gi")
    body["spec"]["decode"]["resources"]["requests"]["memory"] = "16Gi"
    objects = render(body, hmac_key="k")
    for cores, prefill, decode in (
        ([0, 1], "0|1", "0|1|0|1"),
        ([0, 1, 2, 3], "0,1|2,3", "0|1|2|3"),
    ):
        pods = local_pods(
            objects, local_engine("vllm"), "/s", addresses=lambda name: "127.0.9.2",
            cores=[cores, cores], claims=CLAIMS,
        )  # fmt: skip
        binds = [p.env["VLLM_CPU_OMP_THREADS_BIND"] for p in pods]
        assert binds == [prefill, decode]
