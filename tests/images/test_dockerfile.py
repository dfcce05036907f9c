"""The Dockerfile, parsed (no Docker engine here): targets, extras, users, the CUDA swap.

The requirement list the worker-cuda image installs is computed at build time by a script
embedded in the Dockerfile; that script is run here against a freshly built wheel.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.chart.chartkit import ROOT
from tests.support.wheel import build_wheel

TARGETS = ("operator", "worker-cpu", "worker-cuda", "vllm-cpu")


def _logical_lines(text: str) -> list[str]:
    """Instructions with continuations joined and heredoc bodies attached to their line."""
    out: list[str] = []
    lines = iter(text.splitlines())
    pending = ""
    for line in lines:
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = pending + line
        pending = ""
        marker = re.search(r"<<-?'?(\w+)'?", full)
        if marker:
            body = []
            for inner in lines:
                if inner.strip() == marker.group(1):
                    break
                body.append(inner)
            full += "\n" + "\n".join(body)
        out.append(full)
    return out


def parse() -> tuple[dict[str, str], dict[str, list[tuple[str, str]]]]:
    """(global ARG defaults, stage name → [(INSTRUCTION, rest)])."""
    args: dict[str, str] = {}
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for line in _logical_lines((ROOT / "Dockerfile").read_text()):
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            name = re.search(r"\bAS\s+(\S+)", rest, re.IGNORECASE)
            assert name, f"every stage is named: {line}"
            current = stages.setdefault(name.group(1), [])
            current.append((word, rest))
        elif current is None:
            if word == "ARG" and "=" in rest:
                key, _, value = rest.partition("=")
                args[key.strip()] = value.strip()
        else:
            current.append((word, rest))
    return args, stages


ARGS, STAGES = parse()


def _chain(stage: str) -> list[tuple[str, str]]:
    """The stage's instructions after those of the stages it is built FROM, in order."""
    base = STAGES[stage][0][1].split()[0]
    return (_chain(base) if base in STAGES else []) + STAGES[stage]


def _runs(stage: str) -> list[str]:
    return [rest for word, rest in _chain(stage) if word == "RUN"]


def _text(stage: str) -> str:
    return "\n".join(f"{w} {r}" for w, r in _chain(stage))


def test_the_three_targets_exist():
    assert set(TARGETS) <= set(STAGES)


@pytest.mark.parametrize("target", TARGETS)
def test_each_target_runs_as_a_non_root_user(target):
    users = [rest for word, rest in _chain(target) if word == "USER"]
    assert users, f"{target} sets no USER: it would run as root"
    uid = users[-1].split(":")[0].replace("${APP_UID}", ARGS["APP_UID"])
    assert uid.isdigit() and int(uid) != 0, "numeric non-root uid, so runAsNonRoot can check it"
    assert any("useradd" in r and "${APP_UID}" in r for r in _runs(target))


def test_operator_installs_the_operator_extra_and_no_torch_or_nixl():
    text = _text("operator").lower()
    assert any(re.search(r"pip install .*\[operator\]", r) for r in _runs("operator"))
    assert "torch" not in text and "nixl" not in text and "[worker]" not in text
    entry = next(rest for word, rest in STAGES["operator"] if word == "ENTRYPOINT")
    assert entry == '["disagg", "operator"]'


def test_worker_cpu_installs_cpu_torch_before_the_worker_extra():
    runs = _runs("worker-cpu")
    torch = next(i for i, r in enumerate(runs) if "torch==${TORCH_VERSION}" in r)
    extra = next(i for i, r in enumerate(runs) if re.search(r"pip install .*\[worker\]", r))
    assert torch < extra
    assert '--index-url "${TORCH_CPU_INDEX}"' in runs[torch]
    assert ARGS["TORCH_CPU_INDEX"].endswith("/whl/cpu")
    assert "--constraint" in runs[extra]


def test_torch_version_matches_the_one_the_project_pins():
    makefile = (ROOT / "Makefile").read_text() if (ROOT / "Makefile").exists() else ""
    pinned = re.search(r"torch==([\d.]+)", makefile)
    assert ARGS["TORCH_VERSION"] == (pinned.group(1) if pinned else "2.13.0")


def test_worker_cuda_swaps_nixl_cu12_for_nixl_on_cuda_torch():
    base = STAGES["worker-cuda"][0][1]
    assert base.startswith("${CUDA_IMAGE}")
    assert ARGS["CUDA_IMAGE"].startswith("nvidia/cuda:") and "runtime" in ARGS["CUDA_IMAGE"]
    runs = _runs("worker-cuda")
    assert any('--index-url "${TORCH_CUDA_INDEX}"' in r for r in runs)
    assert re.search(r"/whl/cu\d+$", ARGS["TORCH_CUDA_INDEX"])
    install = next(r for r in runs if "--no-deps" in r)
    assert "[worker]" not in install
    assert "-r /wheels/worker-cuda.txt" in install and "--constraint" in install
    assert "nixl-cu12" not in _text("worker-cuda")
    maker = next(r for r in _runs("wheel") if "worker-cuda.txt" in r)
    assert "worker nixl-cu12 nixl" in maker


def _worker_cuda_requirements(tmp_path: Path) -> list[str]:
    """Build the product's wheel as the wheel stage does, run the Dockerfile's own
    list-making script on it."""
    wheel = build_wheel(tmp_path / "wheels")
    maker = next(r for r in _runs("wheel") if "worker-cuda.txt" in r)
    script, *argv = maker.split(">")[0].split()[1:]
    assert argv[1:] == ["worker", "nixl-cu12", "nixl"], maker
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / Path(script).name), str(wheel), *argv[1:]],
        capture_output=True,
        text=True,
        check=True,
    )
    return run.stdout.split()


def test_worker_cuda_requirement_list_from_wheel_metadata(tmp_path):
    reqs = _worker_cuda_requirements(tmp_path)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = [
        *project["dependencies"],
        *(r for r in project["optional-dependencies"]["worker"] if not r.startswith("nixl-cu12")),
        "nixl",
    ]
    norm = [re.sub(r"\s+", "", r).lower() for r in expected]
    assert [r.lower() for r in reqs] == norm
    assert not any(r.startswith("kopf") for r in reqs)  # the operator extra stays out


def test_dockerignore_keeps_what_the_build_copies():
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    assert "*" in ignore  # allow-list: nothing else (venv, .git, tests) enters the context
    copied = {
        part.rstrip("/")
        for word, rest in STAGES["wheel"]
        if word == "COPY"
        for part in rest.split()[:-1]
    }
    copied |= {
        rest.split()[0]
        for stage in STAGES.values()
        for word, rest in stage
        if word == "COPY" and rest.startswith("scripts/")
    }
    assert {"pyproject.toml", "README.md", "operator", "worker", "contract"} <= copied
    for path in copied:
        assert f"!{path}" in ignore or f"!{path}/" in ignore


def _closure(requirements: list[str]) -> set[str]:
    """Installed distributions these requirements pull in, transitively (names normalized)."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        try:
            todo += [Requirement(r) for r in metadata.requires(req.name) or []]
        except metadata.PackageNotFoundError:
            continue
    return seen


def test_operator_image_needs_nothing_from_the_worker_extra():
    """The operator starts with every module only the worker extra brings made unimportable.

    What the operator image lacks (torch, NIXL, pyzmq, msgspec and what they pull in) is
    computed from pyproject's extras and the installed metadata, then `disagg operator
    --help` runs with those modules blocked, importing the operator's whole handler chain.
    """
    from importlib import metadata

    from packaging.utils import canonicalize_name

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base, extras = project["dependencies"], project["optional-dependencies"]
    missing = _closure(base + extras["worker"]) - _closure(base + extras["operator"])
    assert {"torch", "nixl-cu12", "pyzmq"} <= missing
    modules = sorted(
        module
        for module, dists in metadata.packages_distributions().items()
        if any(canonicalize_name(d) in missing for d in dists)
    )
    code = (
        "import sys\n"
        f"for m in {modules!r}: sys.modules[m] = None\n"
        "import disagg_operator.controller.run, disagg_operator.controller.handlers\n"
        "from disagg_operator.cli import main\n"
        "sys.exit(main(['operator', '--help']))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "--all-namespaces" in run.stdout
