"""The README stays a front door: short, its links resolve, and what it states is what the
code does: the `disagg` command table against the real `disagg --help` and
`disagg bench --help`, the objects a DisaggregatedDeployment renders against
`disagg render`, namespaced mode against the chart Helm renders; the figures live in
docs/benchmarks.md, not here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.chart import chartkit

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DISAGG = [sys.executable, "-m", "disagg_operator.cli"]


def _help(*args: str) -> str:
    done = subprocess.run([*DISAGG, *args, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _commands() -> list[str]:
    """`disagg --help`'s commands (two-space indent)."""
    return re.findall(r"^  ([a-z][\w-]*)\s{2,}\S", _help(), re.M)


def _benchmarks() -> list[str]:
    """`disagg bench --help`'s benchmarks, from its usage line."""
    found = re.search(r"usage: disagg bench \{([\w,-]+)\}", _help("bench"))
    assert found, "disagg bench --help lost its usage line"
    return found.group(1).split(",")


def _section(title: str, text: str = README) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"README: no section `## {title}`"
    return found.group(1)


def test_the_readme_is_read_in_minutes() -> None:
    assert len(README.splitlines()) <= 250


def test_the_command_table_is_disagg_help() -> None:
    table = _section("The `disagg` command")
    rows = re.findall(r"^\| `disagg ([\w-]+)([^`]*)`", table, re.M)
    assert sorted(name for name, _ in rows) == sorted(_commands())
    bench = next(rest for name, rest in rows if name == "bench")
    assert bench.strip().replace("\\|", "|").split("|") == _benchmarks()
    assert ("render", " -f FILE") in rows


def test_the_benchmarks_page_lists_every_benchmark() -> None:
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    table = _section("The benchmarks", page)
    listed = set(re.findall(r"^\| `disagg bench ([\w-]+)", table, re.M))
    assert listed == set(_benchmarks())
    layers = (ROOT / "scripts" / "layers.py").read_text()
    assert f"the {len(_benchmarks())} benchmarks (`disagg bench --help`)" in layers


def test_the_readme_quotes_no_figures() -> None:
    """Rates and times belong to docs/benchmarks.md; the `make up` sample (checked against a
    run by test_readme_commands.py) is output, not a claim."""
    text = re.sub(r"<!-- output: [^>]*-->\n```\n.*?```", "", README, flags=re.S)
    figures = re.findall(
        r"\d+(?:\.\d+)?\s?(?:ms|GB/s|MB/s|tok/s|req/s)\b|\d+(?:\.\d+)?\u00d7", text
    )
    assert not figures, f"README quotes {figures}: move them to docs/benchmarks.md"


def _rendered(path: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*DISAGG, "render", "-f", path], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def test_the_readme_names_every_object_the_quickstart_renders() -> None:
    objs = _rendered("examples/quickstart-cpu.yaml")
    name = yaml.safe_load((ROOT / "examples" / "quickstart-cpu.yaml").read_text())["metadata"]
    labels = [o["metadata"].get("labels") or {} for o in objs]
    kv = {x["disagg.dev/kv-revision"] for x in labels if "disagg.dev/kv-revision" in x}
    assert len(kv) == 1, kv
    revision = kv.pop()
    section = _section("The DisaggregatedDeployment resource")
    for obj in objs:
        shown = obj["metadata"]["name"].replace(name["name"], "<name>", 1)
        shown = re.sub(rf"-{re.escape(revision)}$", "-<kv>", shown)
        shown = re.sub(r"-\d+$", "-<i>", shown)
        assert f"`{shown}`" in section, f"README: {obj['kind']} {shown} is not named"
        assert obj["kind"] in section or f"{obj['kind']}s" in section, obj["kind"]


def test_namespaced_mode_renders_a_small_cluster_role(chart: Any) -> None:
    """What the README's install section says of `watchNamespaces`."""
    objs = chartkit.parse(chartkit.render_files(chart, {"watchNamespaces": ["team-a"]}))
    roles = [o for o in objs if o["kind"] == "ClusterRole"]
    assert len(roles) == 1
    granted = {
        (r, v) for rule in roles[0]["rules"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert granted == {
        (r, v) for r in ("namespaces", "customresourcedefinitions") for v in ("list", "watch")
    }
    install = " ".join(_section("Install on a cluster").split())
    assert "a small ClusterRole (list and watch on Namespaces and CRDs)" in install
    assert "instead of a ClusterRole" not in README
