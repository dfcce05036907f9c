"""User docs of the chart and images: links resolve, named files exist, and the facts they
state about derived settings match the code that derives them."""

from __future__ import annotations

import re

import pytest
import yaml

from disagg_contract import platforms
from tests.chart.chartkit import ROOT

DOCS = ["install.md", "heterogeneous.md", "troubleshooting.md", "security.md"]


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


PAGES = [f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")]
LINKED = sorted([*PAGES, "README.md", "CONTRIBUTING.md"])


@pytest.mark.parametrize("name", LINKED)
def test_relative_links_resolve(name):
    """Every relative link of the README, CONTRIBUTING and each page under docs/ names a file
    that exists and, after #, a heading of it (GitHub's anchor)."""
    doc = ROOT / name
    for target in re.findall(r"\]\(([^)#][^)]*|#[^)]+)\)", doc.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        assert file.exists(), f"{name}: broken link {target}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", file.read_text(), re.M)
            assert anchor in {_anchor(h) for h in headings}, f"{name}: no heading #{anchor}"


@pytest.mark.parametrize("name", DOCS)
def test_repository_paths_named_in_docs_exist(name):
    text = (ROOT / "docs" / name).read_text()
    tops = "examples|scripts|charts|crds|worker|operator|tests|docs"
    named = set(re.findall(rf"`((?:{tops})/[\w./-]+)`", text))
    named |= set(re.findall(r"\((\.\./(?:examples|scripts)/[\w./-]+)\)", text))
    for path in named:
        clean = path.removeprefix("../").rstrip("/")
        assert (ROOT / clean).exists(), f"{name} names {path}, which does not exist"


def test_security_doc_ucx_table_matches_the_platform_table():
    text = (ROOT / "docs" / "security.md").read_text()
    rows = dict(re.findall(r"^\| (cpu|cuda|rocm|xpu)\b[^|]*\| `([^`]+)` \|", text, re.M))
    assert rows == {name: platforms.get_platform(name).ucx_tls for name in rows}
    assert set(rows) == {"cpu", "cuda", "rocm", "xpu"}
    assert platforms.get_platform("tpu").ucx_tls == rows["cpu"]
    for transport in ("cma", "cuda_ipc", "rocm_ipc", "ze_ipc", "sm", "posix", "sysv"):
        for platform in platforms.platforms().values():
            assert transport not in platform.ucx_tls.split(","), (platform.name, transport)


def test_install_doc_platforms_example_loads_and_passes_the_schema(chart):
    from disagg_contract import platform_file

    text = (ROOT / "docs" / "install.md").read_text()
    block = re.search(r"```yaml\n(platforms:\n.*?)```", text, re.S)
    assert block, "docs/install.md lost its platforms example"
    values = yaml.safe_load(block.group(1))
    chart.validate_schema(values)
    names = [p.name for p in platform_file.from_document(values["platforms"])]
    assert names == ["hpu", "rocm"]
