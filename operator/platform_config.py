"""Operator-wide render settings shared by ``disagg operator`` and ``disagg render``, so
the operator and offline render produce the same pods: ``--platforms-file`` (read the
platforms file and register what it declares) and ``--canary-image``.

I/O shell over the pure :mod:`disagg_worker.platform_file` loader. A bad file is fatal at
start (exit 2): an operator that silently dropped a platform would refuse every pool on it
later, far from the cause.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from disagg_operator.render import canary
from disagg_worker import platform_file, platforms

HELP = (
    "YAML/JSON list of extra platforms (name, bufferDevices, acceleratorResource, ucxTls, "
    "backends, engineDevice, overrides) to register at start; see docs/install.md"
)


CANARY_ENV = "DISAGG_CANARY_IMAGE"


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--platforms-file", metavar="PATH", help=HELP)
    parser.add_argument(
        "--canary-image",
        metavar="IMAGE",
        default=os.environ.get(CANARY_ENV) or None,
        help="image with the `disagg` command (a disagg worker image) for the decode pods' "
        "transfer-canary container when engine is vllm and spec.transferCanary.image is "
        f"unset; none: vLLM decode pods get no canary (default ${CANARY_ENV})",
    )


def apply_canary_image(image: str | None) -> None:
    canary.set_default_image(image)


def register_file(path: str | None, prog: str) -> list[str] | None:
    """Register the file's platforms and return their names; None after printing why not."""
    if path is None:
        return []
    try:
        declared = platform_file.parse(Path(path).read_text())
    except OSError as e:
        print(f"{prog}: --platforms-file: {e}", file=sys.stderr)
        return None
    except platform_file.PlatformFileError as e:
        print(f"{prog}: --platforms-file {path}: invalid, fix these fields:", file=sys.stderr)
        for problem in e.problems:
            print(f"  {problem}", file=sys.stderr)
        return None
    for platform in declared:
        platforms.register_platform(platform)
    return [p.name for p in declared]
