"""Each image's install imports every module it ships.

What an image ships is scripts/ship.py's answer from pyproject.toml's
``[tool.disagg.images]``; its dependencies are its extra's. Here the image's source tree
is staged as its wheel build stages it, and imported in a Python that sees the standard
library, that tree and a site holding only the extra's distributions (the closure of its
requirements, linked from this environment): nothing a developer's environment has
beside them (kmock, psutil, torch in the operator's, kopf in the worker's). The images
themselves are checked the same way in tests/containers/test_images.py. Each module is
imported alone (:mod:`tests.support.imports`), so this is also the "imports alone" check
of every shipped module (tests/test_imports_alone.py does the rest).
"""

from __future__ import annotations

import importlib.metadata as metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.support.imports import import_each
from tests.support.scripts import load

ship = load("ship.py")

# Third-party libraries the parent imports before its forks, when the site holds them.
PRELOAD = ("pydantic", "yaml", "aiohttp", "kopf", "kubernetes", "torch", "numpy", "zmq", "msgspec")
# What the other image needs and this one's site must not hold.
ABSENT = {"operator": "torch", "worker": "kopf"}


def _key(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirement_closure(extra: str) -> set[str]:
    """The distributions ``pip install 'disagg[extra]'`` installs (as installed here)."""
    todo = []
    for text in metadata.distribution("disagg").requires or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": extra}):
            todo.append(req.name)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if _key(name) in seen:
            continue
        seen.add(_key(name))
        for text in metadata.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def site_of(extra: str, folder: Path) -> Path:
    """A site folder holding links to the files of the extra's distributions only."""
    folder.mkdir(parents=True)
    for name in requirement_closure(extra):
        dist = metadata.distribution(name)
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            source = Path(str(dist.locate_file(top)))
            if top not in ("..", "__pycache__") and source.exists():
                link = folder / top
                if not link.exists():
                    link.symlink_to(source)
    return folder


@pytest.fixture(scope="module", params=sorted(ship.images()))
def image(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    name = request.param
    tmp = tmp_path_factory.mktemp(name)
    tree = tmp / "tree"
    modules = ship.stage(name, tree)
    # the tree's folders under their import names, as the wheel installs them
    (tmp / "ours").mkdir()
    for top, folder in ship.FOLDERS.items():
        if (tree / folder).is_dir():
            (tmp / "ours" / top).symlink_to(tree / folder)
    site = site_of(ship.images()[name]["extra"], tmp / "site")
    return {"name": name, "modules": modules, "tree": tree, "folders": [tmp / "ours", site]}


def test_the_install_of_each_image_imports_every_module_it_ships(image: dict) -> None:
    """Each module alone (a fork per module), within the image's install; and the site is
    the extra's alone: what the other image needs is not there, so a module of ours that
    needed it would fail here."""
    missing = ABSENT[image["name"]]
    found = import_each([*image["modules"], missing], PRELOAD, image["folders"])
    assert found.pop(missing).startswith(f"ModuleNotFoundError: No module named '{missing}'")
    failed = {m: why for m, why in found.items() if why}
    assert not failed, f"{image['name']} image: " + "\n".join(
        f"{m}: {why}" for m, why in sorted(failed.items())
    )


def test_the_operator_image_leaves_the_tools_out_and_ships_what_it_imports() -> None:
    modules = ship.shipped("operator")
    assert "disagg_operator.controller.run" in modules
    assert not [m for m in modules if m.split(".")[1:2] in (["bench"], ["emulator"], ["local"])]
    # a worker module the operator imports ships; the data path does not
    assert "disagg_contract.config" in modules
    assert "disagg_worker.transfer.agent" not in modules
    ours = [m for m in ship.shipped("worker") if m.startswith("disagg_operator")]
    assert ours == ["disagg_operator", "disagg_operator.bench", "disagg_operator.bench.cli",
                    "disagg_operator.cli"]  # fmt: skip
