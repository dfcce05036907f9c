"""docs/heterogeneous.md shows what the operator really renders: its manifest is the
example's (less the HF_TOKEN env it mentions), and its "What the operator runs" commands
are the rendered pods' env and command lines, value for value."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from disagg_operator.render.objects import render

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "heterogeneous.md").read_text()
EXAMPLE = ROOT / "examples" / "heterogeneous-gpu-cpu.yaml"


def _block(kind: str, after: str) -> str:
    found = re.search(re.escape(after) + r".*?```" + kind + r"\n(.*?)```", GUIDE, re.S)
    assert found, f"docs/heterogeneous.md lost its {kind} block after {after!r}"
    return found.group(1)


def _example() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return body


def _pods() -> dict[str, dict[str, Any]]:
    body = _example()
    body["metadata"].update(namespace="default", uid="u")
    pods = [o for o in render(body, hmac_key="k") if o["kind"] == "Pod"]
    return {p["metadata"]["labels"]["disagg.dev/role"]: p for p in pods}


def test_the_guides_manifest_is_the_example() -> None:
    shown = yaml.safe_load(_block("yaml", "## The manifest"))
    example = _example()
    for role in ("prefill", "decode"):  # the guide says it leaves HF_TOKEN out
        assert [e["name"] for e in example["spec"][role].pop("env")] == ["HF_TOKEN"]
    assert shown == example


def _commands() -> dict[str, list[str]]:
    """role → the shell words of its command in the guide (comments and line joins gone)."""
    text = _block("bash", "## What the operator runs")
    out: dict[str, list[str]] = {}
    for chunk in text.strip().split("\n\n"):
        role = "prefill" if "prefill pod" in chunk.splitlines()[0] else "decode"
        lines = [ln.split(" # ")[0].rstrip() for ln in chunk.splitlines()[1:]]
        out[role] = shlex.split(" ".join(ln.rstrip("\\").rstrip() for ln in lines))
    return out


def test_the_guides_commands_are_the_rendered_pods() -> None:
    pods = _pods()
    for role, words in _commands().items():
        engine = pods[role]["spec"]["containers"][0]
        at = words.index("vllm")
        env = dict(w.split("=", 1) for w in words[:at])
        rendered = {e["name"]: e for e in engine["env"]}
        literal = {n: e["value"] for n, e in rendered.items() if "value" in e}
        from_pod_ip = {
            n
            for n, e in rendered.items()
            if e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP"
        }
        assert {n: v for n, v in env.items() if v != "$POD_IP"} == literal, role
        assert {n for n, v in env.items() if v == "$POD_IP"} == from_pod_ip, role
        command = [*engine["command"], *engine.get("args", [])]
        shown = words[at:]
        i = command.index("--kv-transfer-config") + 1
        assert json.loads(shown[i]) == json.loads(command[i]), role
        assert shown[:i] + shown[i + 1 :] == command[:i] + command[i + 1 :], role
