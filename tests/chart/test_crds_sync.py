"""The chart's crds/ is a generated copy of the repository's crds/, kept in sync."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

from tests.chart.chartkit import CHART, ROOT

SYNC = "scripts/sync-chart-crds.sh"
FIX = f"charts/disagg/crds/ is out of date with crds/; run: {SYNC}"


def _header(name: str) -> str:
    return f"# Copied from crds/{name} by {SYNC}; do not edit.\n"


def test_chart_crds_are_a_copy_of_repo_crds():
    repo = sorted((ROOT / "crds").glob("*.yaml"))
    assert repo, "crds/ is empty; generate the CRD with `disagg crd`, then run " + SYNC
    copies = sorted((CHART / "crds").glob("*.yaml"))
    assert [p.name for p in copies] == [p.name for p in repo], FIX
    for src in repo:
        copy = (CHART / "crds" / src.name).read_text()
        assert copy == _header(src.name) + src.read_text(), FIX


def test_helm_ships_the_crd(chart):
    docs = [yaml.safe_load(c["data"]) for c in chart.crds]
    names = {d["metadata"]["name"] for d in docs}
    assert "disaggregateddeployments.disagg.dev" in names
    crd = next(d for d in docs if d["metadata"]["name"] == "disaggregateddeployments.disagg.dev")
    assert crd["spec"]["names"]["shortNames"] == ["disagg"]  # NOTES.txt: `kubectl get disagg`


def test_chart_crd_is_valid_against_upstream_schema(chart):
    import kubernetes_validate

    for item in chart.crds:
        kubernetes_validate.validate(yaml.safe_load(item["data"]), "1.31.0", strict=True)


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / SYNC, root / SYNC)
    (root / "crds").mkdir()
    return root


def test_sync_script_copies_with_header_and_drops_stale_files(tmp_path):
    root = _tree(tmp_path)
    (root / "crds" / "a.yaml").write_text("kind: A\n")
    stale = root / "charts" / "disagg" / "crds" / "old.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: Old\n")
    subprocess.run(["bash", str(root / SYNC)], check=True, capture_output=True)
    out = root / "charts" / "disagg" / "crds"
    assert sorted(p.name for p in out.iterdir()) == ["a.yaml"]
    assert (out / "a.yaml").read_text() == _header("a.yaml") + "kind: A\n"


def test_sync_script_refuses_an_empty_source(tmp_path):
    root = _tree(tmp_path)
    run = subprocess.run(["bash", str(root / SYNC)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "disagg crd" in run.stderr
