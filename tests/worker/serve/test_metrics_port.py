"""The reference worker's /metrics-only listener (DISAGG_METRICS_PORT): what a monitoring
namespace is admitted to serves the metrics page and nothing else."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest

from tests.worker.serve.conftest import StartWorker, get, post


def test_the_metrics_port_serves_metrics_and_nothing_else(start_worker: StartWorker) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    worker = start_worker("decode", metrics_port=free)
    port = worker.ready["metrics_port"]
    assert port == free != worker.ready["http_port"]
    url = f"http://127.0.0.1:{port}"
    page = get(url + "/metrics")
    assert "disagg_" in page
    assert page.splitlines()[0] == get(worker.url + "/metrics").splitlines()[0]  # the same page
    status, body = post(url + "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 1})
    assert status == 404 and body["error"]["code"] == 404  # no completion there
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "/debug/blocks", timeout=10)
    assert e.value.code == 404


def test_without_a_metrics_port_there_is_no_second_listener(start_worker: StartWorker) -> None:
    worker = start_worker("decode", metrics_port=0)  # 0: none (disagg up's processes)
    assert "metrics_port" not in worker.ready
