"""The operator-wide settings ``disagg operator`` and ``disagg render`` share, from their
flags ``--platforms-file`` (extra platforms) and ``--canary-image``. Shared, so the
operator and offline render produce the same pods.

I/O shell (reads the platforms file) over the pure :mod:`disagg_contract.platform_file`
loader; the result is a :class:`~disagg_operator.engines.settings.Settings` value, passed
on, never stored. A bad file is fatal at start (exit 2): an operator that silently dropped
a platform would refuse every pool on it later, far from the cause.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from disagg_contract import platform_file
from disagg_operator.engines.settings import DEFAULT, Settings

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


def settings(args: argparse.Namespace, prog: str) -> Settings | None:
    """The settings the flags ask for; None after printing why not (a bad platforms file)."""
    out = Settings(canary_image=args.canary_image or None)
    path = args.platforms_file
    if path is None:
        return out
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
    return out.with_platforms(declared)


def added_platforms(chosen: Settings) -> list[str]:
    """Names of the platforms ``chosen`` serves beyond the built-ins."""
    return sorted(set(chosen.platforms) - set(DEFAULT.platforms))
