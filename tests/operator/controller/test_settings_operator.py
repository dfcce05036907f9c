"""Two operators in one process, each with its own settings, each renders its own way: the
settings are a value each operator holds, not process state (no registry, no global
default image)."""

from __future__ import annotations

import contextlib

import kmock
import yaml

from disagg_contract.platforms import Platform
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.run import running
from disagg_operator.engines.settings import Settings
from tests.operator.conftest import DD_PATH, NS, ROOT, api, pods, until
from tests.support.emulator import Emulator, serve_project_crds

HPU = Platform("hpu", ("hpu", "cpu"), "habana.ai/gaudi", "tcp,self")


def _vllm(device: str) -> dict[str, object]:
    body = yaml.safe_load((ROOT / "examples" / "vllm-cpu.yaml").read_text())
    body["metadata"] = {"name": "demo", "namespace": NS}
    if device == "hpu":
        body["spec"]["prefill"].update(
            device="hpu",
            kvBufferDevice="cpu",
            acceleratorMemory="4Gi",  # sizes the host copy a cpu buffer keeps
            resources={"limits": {"habana.ai/gaudi": 1, "memory": "8Gi"}},
        )
        # pools of different devices declare what vLLM's handshake check would compare
        for role in ("prefill", "decode"):
            body["spec"][role]["args"] = ["--max-model-len", "1024", "--enforce-eager"]
        body["spec"]["modelConfig"] = {"dtype": "bfloat16", "kvCacheDtype": "auto", "blockSize": 64}
    return body


def _canary_image(emu: Emulator) -> str | None:
    decode = pods(emu).get("demo-decode-0")
    if decode is None:
        return None
    found = [c["image"] for c in decode["spec"]["containers"] if c["name"] == "transfer-canary"]
    return found[0] if found else ""


async def test_two_operators_with_different_settings_render_their_own_way() -> None:
    a_settings = Settings(canary_image="example.com/canary-a:1")
    b_settings = Settings(canary_image="example.com/canary-b:2").with_platforms([HPU])
    async with contextlib.AsyncExitStack() as stack:
        emus = []
        for _ in range(2):
            emu = await stack.enter_async_context(Emulator())
            await stack.enter_async_context(kmock.Server(emu))
            serve_project_crds(emu)
            emus.append(emu)
        a, b = emus
        await stack.enter_async_context(
            running(OperatorConfig(host=str(a.url).rstrip("/"), settings=a_settings))
        )
        await stack.enter_async_context(
            running(OperatorConfig(host=str(b.url).rstrip("/"), settings=b_settings))
        )
        await api(a, "POST", DD_PATH, _vllm("hpu"))
        await api(b, "POST", DD_PATH, _vllm("hpu"))
        # b knows hpu and renders its pods with its canary image; a refuses the device
        assert await until("b renders", lambda: _canary_image(b)) == "example.com/canary-b:2"
        await until(
            "a refuses hpu",
            lambda: (
                "unknown device 'hpu'"
                in str(a.find("disagg.dev/v1alpha1/disaggregateddeployments", NS, "demo") or {})
            ),
        )
        assert pods(a) == {}
        # a cpu deployment in a gets a's canary image
        await api(a, "DELETE", f"{DD_PATH}/demo")
        await until(
            "a forgets demo",
            lambda: a.find("disagg.dev/v1alpha1/disaggregateddeployments", NS, "demo") is None,
        )
        await api(a, "POST", DD_PATH, _vllm("cpu"))
        assert await until("a renders", lambda: _canary_image(a)) == "example.com/canary-a:1"
