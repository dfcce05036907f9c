"""The preflight of `disagg up`: each problem a started run would meet late is one line on
stderr naming the fix, exit status 2, no traceback, before any process starts and without
importing torch or vLLM; and the verdict's rules case by case.

The commands run as `.venv/bin/disagg up` subprocesses on a staged host: PATH is an empty
folder (no podman, no nvidia-smi), and a sitecustomize on PYTHONPATH hides what the case
says is missing (a module, as ``sys.modules[name] = None`` makes it look uninstalled to
``find_spec`` and to ``import``; a device file, from ``os.stat``) and records the modules
loaded at exit. ``python tests/tools/local/test_preflight.py`` prints each case's wall time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_tools.local import preflight
from disagg_tools.local.engines import BUILTIN, LocalEngine, LocalRun
from disagg_tools.local.rules.preflight import (
    SIGNS,
    Asked,
    Host,
    Request,
    asked,
    deployment,
    device_problems,
    engine_problems,
    port_problems,
    probed_port,
    problems,
    runtime_problems,
)

ROOT = Path(__file__).resolve().parents[3]
DISAGG = Path(sys.executable).with_name("disagg")
QUICKSTART = ROOT / "examples" / "quickstart-cpu.yaml"
VLLM = ROOT / "examples" / "vllm-cpu.yaml"
HEAVY = ("torch", "vllm", "nixl_cu12", "nixl")
DEVICE_FILES = tuple(p for s in SIGNS.values() for p in s.paths)

STAGE = """
import atexit, errno, json, os, sys

for name in filter(None, os.environ["STAGE_HIDE_MODULES"].split(",")):
    sys.modules[name] = None  # as if not installed: find_spec answers None, import fails

_absent = set(filter(None, os.environ["STAGE_HIDE_FILES"].split(",")))
_stat = os.stat


def _staged_stat(path, *args, **kwargs):
    if isinstance(path, (str, os.PathLike)) and os.fspath(path) in _absent:
        raise FileNotFoundError(errno.ENOENT, "hidden by the test", path)
    return _stat(path, *args, **kwargs)


os.stat = _staged_stat


def _record():
    with open(os.environ["STAGE_LOADED"], "w") as f:
        json.dump(sorted(n for n, m in sys.modules.items() if m is not None), f)


atexit.register(_record)
"""


def _quickstart(**pools: str) -> str:
    """The quickstart with ``pool=device`` changes."""
    body = yaml.safe_load(QUICKSTART.read_text())
    for pool, device in pools.items():
        body["spec"][pool]["device"] = device
    return yaml.safe_dump(body)


@dataclass(frozen=True)
class Case:
    """One `disagg up` that the preflight refuses: the manifest (a path, or text written to
    a file), the flags ({held}: a port another socket holds), the modules the staged host
    lacks, and the fix the one line must name."""

    name: str
    manifest: Path | str
    flags: tuple[str, ...]
    fix: str
    hide: tuple[str, ...] = ()


CASES = (
    Case("port busy", QUICKSTART, ("--port", "{held}"), "pass --port 0 (any free port)"),
    Case("port out of range", QUICKSTART, ("--port", "70000"), "give 1..65535, or --port 0"),
    Case("vllm extra missing", VLLM, ("--port", "0"), "run `make up-vllm`", hide=("vllm",)),
    Case(
        "cuda pool, no GPU",
        _quickstart(prefill="cuda"),
        ("--port", "0"),
        "set spec.prefill.device: cpu, or run on a host with an NVIDIA GPU",
    ),
    Case("podman missing", QUICKSTART, ("--runtime", "podman", "--port", "0"), "`make images`"),
    Case("empty manifest", "", ("--port", "0"), "write one DisaggregatedDeployment in it"),
    Case(
        "no DisaggregatedDeployment",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        ("--port", "0"),
        "holds no DisaggregatedDeployment (it holds: ConfigMap): add one",
    ),
)


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    loaded: list[str]
    wall_s: float


@pytest.fixture
def held_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def run_case(case: Case, tmp: Path, held: int) -> Outcome:
    """`disagg up` of ``case`` as a subprocess on the staged host."""
    (tmp / "stage").mkdir(exist_ok=True)
    (tmp / "stage" / "sitecustomize.py").write_text(STAGE)
    (tmp / "empty-path").mkdir(exist_ok=True)
    manifest = case.manifest
    if isinstance(manifest, str):
        text, manifest = manifest, tmp / "manifest.yaml"
        manifest.write_text(text)
    env = {
        **os.environ,
        "PATH": str(tmp / "empty-path"),
        "PYTHONPATH": str(tmp / "stage"),
        "STAGE_HIDE_MODULES": ",".join(case.hide),
        "STAGE_HIDE_FILES": ",".join(DEVICE_FILES),
        "STAGE_LOADED": str(tmp / "loaded.json"),
    }
    flags = [f.format(held=held) for f in case.flags]
    t0 = time.perf_counter()
    done = subprocess.run(
        [str(DISAGG), "up", str(manifest), *flags],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp,
    )  # fmt: skip
    wall = time.perf_counter() - t0
    loaded = json.loads((tmp / "loaded.json").read_text())
    return Outcome(done.returncode, done.stdout, done.stderr, loaded, wall)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_disagg_up_refuses_with_one_line_naming_the_fix(
    case: Case, tmp_path: Path, held_port: int
) -> None:
    out = run_case(case, tmp_path, held_port)
    assert out.code == preflight.EXIT_STATUS, out
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("disagg up: "), out.stderr
    assert case.fix in lines[0], out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    assert out.stdout == ""  # nothing started, nothing said
    assert not [m for m in out.loaded if m.split(".")[0] in HEAVY], out.loaded
    assert "disagg_tools.local.preflight" in out.loaded  # the record is of this run


def test_the_staged_host_hides_only_what_a_case_names(tmp_path: Path, held_port: int) -> None:
    # the same vLLM run with nothing hidden (and a port that stops it either way): what the
    # preflight says of vLLM is then this host's own answer, not the stage's
    case = replace(CASES[2], flags=("--port", "70000"), hide=())
    out = run_case(case, tmp_path, held_port)
    installed = importlib.util.find_spec("vllm") is not None
    assert ("make up-vllm" in out.stderr) is not installed, out.stderr
    assert "--port 70000" in out.stderr


def test_problems_of_every_kind_are_said_together(tmp_path: Path, held_port: int) -> None:
    case = Case(
        "all", _quickstart(prefill="cuda", decode="cuda"), ("--port", "-1", "--runtime", "podman"),
        fix="",
    )  # fmt: skip
    out = run_case(case, tmp_path, held_port)
    fields = [line.split(": ")[1] for line in out.stderr.splitlines()]
    assert fields == [
        "--port -1",
        "--runtime podman",
        "spec.prefill.device",
        "spec.decode.device",
    ], out.stderr


def test_a_runnable_manifest_passes() -> None:
    assert preflight.check_file(QUICKSTART, port=0) == []
    body = yaml.safe_load(QUICKSTART.read_text())
    assert preflight.check(body, port=None) == []  # one body, as an embedding command has it


def test_a_file_that_cannot_be_read_or_parsed_is_one_line(tmp_path: Path) -> None:
    missing = preflight.check_file(tmp_path / "nope.yaml", port=70000)
    assert [p.field for p in missing] == [str(tmp_path / "nope.yaml"), "--port 70000"]
    assert "No such file or directory" in missing[0].message
    bad = tmp_path / "bad.yaml"
    bad.write_text("spec:\n  prefill: [\n")
    (problem,) = preflight.check_file(bad)
    assert "\n" not in str(problem) and "line 3, column 1" in problem.message, problem


def test_fail_prints_one_line_each_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        preflight.fail([preflight.Problem("--port 1", "two\nlines"), "plain"], prog="x")
    assert exited.value.code == 2
    assert capsys.readouterr().err == "x: --port 1: two lines\nx: plain\n"


def _left_in_time_wait(reuse: bool) -> int:
    """A port whose server closed its connection first (TIME_WAIT), then stopped."""
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, int(reuse))
        server.bind(("127.0.0.1", 0))
        server.listen()
        port: int = server.getsockname()[1]
        assert preflight.port_state(port) == "busy"  # listening
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()
        client.close()
    return port


def _proxy_binds(port: int) -> bool:
    """Whether the proxy's own bind (aiohttp's TCPSite: asyncio's create_server) succeeds."""

    async def bind() -> bool:
        try:
            server = await asyncio.get_running_loop().create_server(
                asyncio.Protocol, "127.0.0.1", port
            )
        except OSError:
            return False
        server.close()
        await server.wait_closed()
        return True

    return asyncio.run(bind())


@pytest.mark.parametrize("reuse", [True, False], ids=["last-server-reused", "last-server-plain"])
def test_the_port_probe_agrees_with_the_proxys_own_bind(reuse: bool) -> None:
    # a port a closed connection left in TIME_WAIT: Linux lets a SO_REUSEADDR bind have it
    # when the last server set SO_REUSEADDR too (a proxy run just stopped), else not
    port = _left_in_time_wait(reuse)
    assert preflight.port_state(port) == ("free" if _proxy_binds(port) else "busy")


# -- the rules ------------------------------------------------------------------------

DD = {"kind": "DisaggregatedDeployment", "metadata": {"name": "a"}}
CM = {"kind": "ConfigMap"}


@pytest.mark.parametrize(
    ("docs", "found", "message"),
    [
        ((), False, "is empty"),
        ((None, None), False, "is empty"),  # "---\n---\n"
        ((CM,), False, "holds no DisaggregatedDeployment (it holds: ConfigMap)"),
        (("text",), False, "holds no DisaggregatedDeployment: add one"),
        ((DD, {**DD, "metadata": {"name": "b"}}), False, "holds 2 DisaggregatedDeployments (a, b)"),
        ((CM, DD), True, None),
    ],
)
def test_the_manifest_holds_one_deployment(
    docs: tuple[Any, ...], found: bool, message: str | None
) -> None:
    body, found_problems = deployment(docs, "f.yaml")
    assert (body is not None) is found
    assert [p.field for p in found_problems] == ([] if found else ["f.yaml"])
    if message:
        assert message in found_problems[0].message


@pytest.mark.parametrize(
    ("port", "state", "fix"),
    [
        (-1, None, "is out of range: give 1..65535, or --port 0"),
        (65536, None, "is out of range"),
        (70000, None, "is out of range"),
        (0, None, None),  # any free port: nothing to probe
        (65535, "free", None),
        (1, "free", None),
        (8080, "busy", "127.0.0.1:8080 is in use by another process: pass --port 0"),
        (80, "denied", "need root here: pass --port 0 (any free port) or a port from 1024 up"),
        (8080, None, None),  # probed, unknown failure: the run's own bind says it
    ],
)
def test_port(port: int, state: Any, fix: str | None) -> None:
    found = port_problems(port, state)
    assert [p.field for p in found] == ([f"--port {port}"] if fix else [])
    if fix:
        assert fix in found[0].message


def test_port_problems_name_the_flag_given() -> None:
    (problem,) = port_problems(70000, None, flag="--api-port")
    assert problem.field == "--api-port 70000" and "--api-port 0" in problem.message


@pytest.mark.parametrize(("port", "probed"), [(None, None), (0, None), (-3, None), (70000, None),
                                              (8080, 8080), (65535, 65535), (1, 1)])  # fmt: skip
def test_only_a_port_in_range_is_bound(port: int | None, probed: int | None) -> None:
    assert probed_port(port) == probed


def _body(engine: str = "reference", prefill: str = "cpu", decode: str = "cpu") -> dict[str, Any]:
    spec = {
        "engine": {"type": engine},
        "prefill": {"device": prefill},
        "decode": {"device": decode},
    }
    return {**DD, "spec": spec}


@pytest.mark.parametrize(
    ("engine", "runtime", "modules", "fixes"),
    [
        ("vllm", "process", frozenset(), ["run `make up-vllm` (it installs the vllm extra)"]),
        ("vllm", "process", frozenset({"vllm"}), []),
        ("vllm", "podman", frozenset(), []),  # the image holds vLLM
        ("reference", "process", frozenset(), []),
        ("sglang", "process", frozenset(), []),  # no local-run module: render refuses it
    ],
)
def test_an_engine_module_missing_from_this_install(
    engine: str, runtime: str, modules: frozenset[str], fixes: list[str]
) -> None:
    found = engine_problems(_body(engine), Host(modules=modules), runtime)
    assert [p.field for p in found] == ["spec.engine.type"] * len(fixes)
    assert [p.message.split(": ", 1)[1] for p in found] == fixes


def test_an_engine_without_an_install_step_names_the_module() -> None:
    class Toy(LocalEngine):
        name = "toy"
        run = LocalRun(
            start_timeout_s=1.0, readiness="health", warm_up=False, figures="response",
            requires=("toy_engine_lib",),
        )  # fmt: skip

    engines: Mapping[str, LocalEngine] = {"toy": Toy()}
    (problem,) = engine_problems(_body("toy"), Host(), "process", engines)
    assert problem.message.endswith("which is not installed: install toy_engine_lib")
    assert asked(Request((_body("toy"),), "f"), engines).modules == ("toy_engine_lib",)


@pytest.mark.parametrize(
    ("prefill", "decode", "devices", "fields"),
    [
        ("cuda", "cpu", frozenset(), ["spec.prefill.device"]),
        ("cuda", "cuda", frozenset(), ["spec.prefill.device", "spec.decode.device"]),
        ("cuda", "cpu", frozenset({"cuda"}), []),
        ("cpu", "rocm", frozenset({"cuda"}), ["spec.decode.device"]),
        ("xpu", "tpu", frozenset(), []),  # no sign to tell by: left to the run
        ("cpu", "cpu", frozenset(), []),
    ],
)
def test_a_pool_on_an_accelerator_this_host_lacks(
    prefill: str, decode: str, devices: frozenset[str], fields: list[str]
) -> None:
    found = device_problems(_body(prefill=prefill, decode=decode), Host(devices=devices))
    assert [p.field for p in found] == fields
    for problem in found:
        device = _body(prefill=prefill, decode=decode)["spec"][problem.field.split(".")[1]]
        hardware = SIGNS[device["device"]].hardware
        assert problem.message.endswith(
            f"set {problem.field}: cpu, or run on a host with {hardware}"
        )


def test_a_pool_spec_of_the_wrong_shape_is_left_to_validation() -> None:
    specs: list[Any] = [None, [], {"prefill": "cuda"}, {"prefill": {"device": 3}}]
    for spec in specs:
        assert device_problems({**DD, "spec": spec}, Host()) == []
        assert engine_problems({**DD, "spec": spec}, Host(), "process") == []


@pytest.mark.parametrize(
    ("runtime", "programs", "fix"),
    [
        ("podman", frozenset(), "podman is not on PATH: install it (`make images` does"),
        ("podman", frozenset({"podman"}), None),
        ("process", frozenset(), None),
        ("docker", frozenset({"docker"}), "'docker' is not a runtime: give one of process, podman"),
    ],
)
def test_the_runtime_program(runtime: str, programs: frozenset[str], fix: str | None) -> None:
    found = runtime_problems(runtime, Host(programs=programs))
    assert len(found) == (1 if fix else 0)
    if fix:
        assert fix in found[0].message


@pytest.mark.parametrize(
    ("request_", "wanted"),
    [
        (Request((_body("vllm"),), "f", 8080), Asked(8080, ("vllm",), (), ())),
        (Request((_body("vllm"),), "f", 0, "podman"), Asked(None, (), (), ("podman",))),
        (Request((_body(prefill="cuda", decode="rocm"),), "f"), Asked(None, (), ("cuda", "rocm"))),
        (Request((_body(prefill="cuda", decode="cuda"),), "f"), Asked(None, (), ("cuda",))),
        (Request((), "f", 70000), Asked()),  # out of range: nothing to bind
        (Request(None, "f", 8080, "podman"), Asked(8080, (), (), ("podman",))),
    ],
)
def test_what_is_looked_up_follows_the_run(request_: Request, wanted: Asked) -> None:
    assert asked(request_) == wanted


def test_an_unreadable_manifest_still_has_its_port_and_runtime_checked() -> None:
    request = Request(None, "f", 8080, "podman")
    found = problems(request, Host(port="busy"))
    assert [p.field for p in found] == ["--port 8080", "--runtime podman"]


def test_the_builtin_engines_that_need_an_extra_name_its_make_target() -> None:
    needing = {n: e.run.install for n, e in BUILTIN.items() if e.run.requires}
    assert needing == {"vllm": "run `make up-vllm` (it installs the vllm extra)"}
    makefile = (ROOT / "Makefile").read_text()
    assert "\nup-vllm:" in makefile


def test_the_readme_names_each_fix() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Troubleshooting local runs", 1)[1].split("\n#", 1)[0]
    for fix in (
        "--port 0",
        "make up-vllm",
        "device: cpu",
        "make images",
        "DisaggregatedDeployment",
    ):
        assert fix in section, fix


if __name__ == "__main__":  # each case's wall time (a figure, not a timed assert)
    import resource
    import tempfile

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        for case in CASES:
            used = resource.getrusage(resource.RUSAGE_CHILDREN)
            with tempfile.TemporaryDirectory() as tmp:
                out = run_case(case, Path(tmp), held.getsockname()[1])
            now = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = now.ru_utime + now.ru_stime - used.ru_utime - used.ru_stime
            print(f"{case.name:28} exit {out.code}  wall {out.wall_s:4.2f} s  cpu {cpu:4.2f} s")
