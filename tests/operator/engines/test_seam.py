"""The engine seam is enough: an engine defined here, in the tests, plugs into the
operator through the settings alone, and render, validation, the KV key, status, the CRD
and the local runner (given its local-run part) serve it without a line of theirs changed.
And no module outside operator/disagg_operator/engines/ asks which engine a spec runs."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from disagg_operator.api import HTTP_PORT, ROLES, DeploymentSpec, EngineFields
from disagg_operator.api.base import _Model
from disagg_operator.api.problems import Problem
from disagg_operator.derive.scaling import ENDPOINTS_PROPAGATION_S
from disagg_operator.engines.base import Container, DemandSeries, Engine, EngineDocs
from disagg_operator.engines.settings import DEFAULT, Settings
from disagg_operator.planning import status
from disagg_operator.planning.decide import decide, rendering
from disagg_operator.planning.observed import Observed
from disagg_operator.render import crd, derivation, kvkey
from disagg_operator.render.objects import render
from disagg_operator.validation import spec as validation
from disagg_tools.local.engines import LocalEngine, LocalProcess, LocalRun
from disagg_tools.local.rules.pods import local_pods
from tests.operator.builders import body, by_kind, role
from tests.operator.planning.test_status import T0

ROOT = Path(__file__).resolve().parents[3]


class EchoModel(_Model):
    """spec.modelConfig: echo's own field, and one vLLM declares too (both read it)."""

    echo_layers: int | None = Field(default=None, ge=1, description="echo: layers to echo")
    max_model_len: int | None = Field(default=None, ge=1, description="echo: the context")


class EchoRole(_Model):
    echo_threads: int = Field(default=1, ge=1, description="echo: threads per pod")


class Echo(Engine):
    """A toy engine: ``echo-serve MODEL``, one side channel, a fixed drain, TP 1 or 2, and
    spec fields of its own."""

    name = "echo"
    summary = "a test engine"
    cel_rules = (("self.engine.type != 'echo' || self.decode.replicas <= 4", "echo: 4 at most"),)
    kv_flags = ("--echo-layout",)
    kv_env = ("ECHO_DTYPE",)
    derived_flags: Mapping[str, str] = {"--listen": "nothing: it is the pod's port"}
    demand = DemandSeries("echo_prompt_total", "echo_output_total", "echo_requests_total",
                          "echo_running")  # fmt: skip
    fields = EngineFields(model_spec=EchoModel, role=EchoRole)

    def container(
        self, spec: DeploymentSpec, role: str, port: int, settings: Settings
    ) -> Container:
        env = [{"name": "ECHO_ROLE", "value": role}, {"name": "ECHO_PORT", "value": str(port)}]
        own, pool = spec.model_spec, spec.role(role)
        layers = own.echo_layers if isinstance(own, EchoModel) and own.echo_layers else None
        threads = pool.echo_threads if isinstance(pool, EchoRole) else 1
        extra = [f"--layers={layers}"] if layers else []
        argv = ["echo-serve", spec.model, "--listen", str(port), f"--threads={threads}"]
        return Container([*argv, *extra], env)

    def side_channel_ports(self, spec: DeploymentSpec, role: str) -> list[int]:
        return [spec.kv_transfer.side_channel_port]

    def drain_seconds(self, spec: DeploymentSpec) -> int:
        return 7

    def annotations(self, spec: DeploymentSpec) -> dict[str, str]:
        return {"example.com/echo": "yes"}

    def problems(self, spec: DeploymentSpec, settings: Settings) -> Iterator[Problem]:
        for r in ROLES:
            if spec.role(r).tensor_parallel_size > 2:
                yield Problem(f"spec.{r}.tensorParallelSize", "echo runs TP 1 or 2; set 2")

    def version_condition(self, spec: DeploymentSpec) -> tuple[str, str, str]:
        return ("True", "VersionResolved", "echo has one version")

    def derived_env(self, spec: DeploymentSpec, role: str) -> Mapping[str, str]:
        return {"ECHO_ROLE": "nothing: it is the pod's role"}


class EchoDocs(EngineDocs):
    """Echo's part of the generated docs."""

    name = "echo"

    def derivation_rows(self, settings: Settings) -> list[tuple[str, str, str, str]]:
        return [("drain", "echo", "7", "a toy")]


class EchoLocal(LocalEngine):
    """Echo's local-run part: ``python -m echo`` on a port of its own."""

    name = "echo"
    run = LocalRun(start_timeout_s=5.0, readiness="health", warm_up=False, figures="response")

    def process(
        self,
        name: str,
        command: Sequence[str],
        env: dict[str, str],
        *,
        secret_path: str,
        address: str,
        cores: Sequence[int] = (),
        host_ports: Iterator[int] | None = None,
    ) -> LocalProcess:
        argv = [sys.executable, "-m", "echo", *command[1:], "--host", address]
        return LocalProcess(argv, env, 9000, ["echo"])


SETTINGS = DEFAULT.with_engines(Echo())


def _echo(**spec: Any) -> dict[str, Any]:
    obj = body(**spec)
    obj["spec"]["engine"] = {"type": "echo", "image": "example.com/echo:1"}
    obj["spec"]["model"] = "toy"
    return obj


def test_the_default_settings_do_not_serve_it() -> None:
    (problem,) = validation.parse(_echo())[1]
    assert problem.field == "spec.engine.type" and "use vllm, reference" in problem.message


def test_render_builds_its_pods_from_the_interface() -> None:
    pods = by_kind(render(_echo(), hmac_key="k", settings=SETTINGS), "Pod")
    assert [p["metadata"]["name"] for p in pods] == ["demo-prefill-0", "demo-decode-0"]
    for pod in pods:
        engine = pod["spec"]["containers"][0]
        assert engine["command"] == ["echo-serve", "toy", "--listen", str(HTTP_PORT), "--threads=1"]
        assert {"name": "ECHO_ROLE", "value": pod["metadata"]["labels"]["disagg.dev/role"]} in (
            engine["env"]
        )
        assert [p["containerPort"] for p in engine["ports"]] == [HTTP_PORT, 5600]
        # the base preStop: the settle (no router: endpoint propagation), then the drain
        wait = ENDPOINTS_PROPAGATION_S + 7
        assert engine["lifecycle"]["preStop"]["exec"]["command"] == ["sleep", str(wait)]
        assert pod["spec"]["terminationGracePeriodSeconds"] == wait + 10
        assert pod["metadata"]["annotations"]["example.com/echo"] == "yes"
        assert pod["spec"]["volumes"] == []
    decode = pods[1]["spec"]["containers"]
    assert [c["name"] for c in decode] == ["engine"]  # no --canary-image: no canary
    with_canary = Settings(canary_image="example.com/disagg:1").with_engines(Echo())
    decode = by_kind(render(_echo(), hmac_key="k", settings=with_canary), "Pod")[1]
    assert decode["spec"]["containers"][1]["image"] == "example.com/disagg:1"


def test_validation_asks_it_what_it_cannot_run_and_what_it_derives() -> None:
    obj = _echo(prefill=role(tensorParallelSize=4), decode=role(tensorParallelSize=4))
    obj["spec"]["decode"]["args"] = ["--listen=9"]
    obj["spec"]["decode"]["env"] = [{"name": "ECHO_ROLE", "value": "x"}]
    fields = sorted(p.field for p in validation.parse(obj, SETTINGS)[1])
    assert fields == [
        "spec.decode.args[0]",
        "spec.decode.env[0]",
        "spec.decode.tensorParallelSize",
        "spec.prefill.tensorParallelSize",
    ]


def test_its_kv_inputs_move_the_kv_revision() -> None:
    def revision(**decode: Any) -> str:
        dd, problems = validation.parse(_echo(decode=role(**decode)), SETTINGS)
        assert dd is not None and not problems, problems
        return kvkey.kv_revision(dd.spec, SETTINGS)

    base = revision()
    assert revision(args=["--echo-layout", "b"]) != base
    assert revision(env=[{"name": "ECHO_DTYPE", "value": "f16"}]) != base
    assert revision(args=["--other", "b"]) == base


def test_status_reports_its_version_condition() -> None:
    obj = _echo()
    dd, problems = validation.parse(obj, SETTINGS)
    assert dd is not None and not problems
    seen = Observed("demo", T0, generation=1)
    plan = decide(dd, seen, rendering(dd, "u", SETTINGS))
    found = status.compute(seen, spec=dd.spec, problems=[], rollout=plan, settings=SETTINGS)
    versions = [c for c in found["conditions"] if c["type"] == "EngineVersionKnown"]
    assert [(c["status"], c["message"]) for c in versions] == [("True", "echo has one version")]


def test_the_crd_lists_it_with_its_rules() -> None:
    schema = crd.build(SETTINGS.engines)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = schema["properties"]["spec"]
    assert spec["properties"]["engine"]["properties"]["type"]["enum"] == [
        "vllm",
        "reference",
        "echo",
    ]
    assert {"rule": Echo.cel_rules[0][0], "message": "echo: 4 at most"} in spec[
        "x-kubernetes-validations"
    ]
    docs = {**derivation.ENGINE_DOCS, "echo": EchoDocs()}
    assert ("drain", "echo", "7", "a toy") in derivation.derivation_rows(SETTINGS, docs)
    assert ("drain", "echo", "7", "a toy") not in derivation.derivation_rows(SETTINGS)


def test_its_own_spec_fields_join_the_crd_and_the_parse_at_their_paths() -> None:
    spec = crd.build(SETTINGS.engines)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    props = spec["properties"]["spec"]["properties"]
    assert props["modelConfig"]["properties"]["echoLayers"]["description"] == "echo: layers to echo"
    assert "maxModelLen" in props["modelConfig"]["properties"]  # vLLM's stays
    for r in ROLES:
        assert props[r]["properties"]["echoThreads"]["default"] == 1
    obj = _echo(modelConfig={"echoLayers": 3, "maxModelLen": 64}, decode=role(echoThreads=2))
    pods = by_kind(render(obj, hmac_key="k", settings=SETTINGS), "Pod")
    commands = [p["spec"]["containers"][0]["command"][-2:] for p in pods]
    assert commands == [["--threads=1", "--layers=3"], ["--threads=2", "--layers=3"]]


def test_a_field_only_other_engines_read_is_refused_naming_them() -> None:
    vllm_field = _echo(prefill=role(nixlVersion="1.5.0"))
    ((field, message),) = [(p.field, p.message) for p in validation.parse(vllm_field, SETTINGS)[1]]
    assert field == "spec.prefill.nixlVersion"
    assert message == (
        "a field of engine vllm; engine echo does not read it: remove it (or use engine vllm)"
    )
    defaulted = _echo(kvTransfer={"nixlProgressDelayMicroseconds": 5000})  # as admission has it
    assert validation.parse(defaulted, SETTINGS)[1] == []
    shared = body(engine="vllm", modelConfig={"maxModelLen": 64})  # both engines read it
    assert validation.parse(shared, SETTINGS)[1] == []
    echo_field = body(engine="vllm", modelConfig={"echoLayers": 2})
    problems = validation.parse(echo_field, SETTINGS)[1]
    assert [(p.field, "a field of engine echo;" in p.message) for p in problems] == [
        ("spec.modelConfig.echoLayers", True)
    ]
    (unknown,) = validation.parse(echo_field)[1]  # settings without echo: no such field
    assert unknown.field == "spec.modelConfig.echoLayers" and "unknown field" in unknown.message


def test_the_local_runner_runs_it_as_it_says() -> None:
    objects = render(_echo(), hmac_key="k", settings=SETTINGS)
    at = {"demo-prefill-0": "127.0.9.2", "demo-decode-0": "127.0.9.3"}
    pods = local_pods(objects, EchoLocal(), "/s", addresses=at.__getitem__)
    assert [p.argv[:3] for p in pods] == [[sys.executable, "-m", "echo"]] * 2
    assert [(p.address, p.argv[-1], p.http_port) for p in pods] == [
        ("127.0.9.2", "127.0.9.2", 9000), ("127.0.9.3", "127.0.9.3", 9000)
    ]  # fmt: skip
    assert all(p.local == EchoLocal.run for p in pods)


def _compares_engine_type(tree: ast.AST) -> list[int]:
    """Lines comparing ``<x>.engine.type`` (or ``engine.type`` as a name) with anything."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                text = ast.unparse(side)
                if text.endswith("engine.type") or text.endswith(".engine"):
                    lines.append(node.lineno)
    return lines


def test_no_module_outside_the_engines_folders_compares_the_engine_type() -> None:
    found = {}
    for path in sorted((ROOT / "operator").rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[1] == "engines":
            continue
        lines = _compares_engine_type(ast.parse(path.read_text()))
        if lines:
            found[str(rel)] = lines
    assert found == {}
    # the check itself finds such a comparison
    assert _compares_engine_type(ast.parse("if spec.engine.type == 'vllm': pass")) == [1]
