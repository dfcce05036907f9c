"""`disagg render [-f] FILE`: print every object a manifest renders to, offline.

CLI layer over :func:`disagg_operator.render.objects.render` (the operator's own builder). No
cluster is contacted: the owner uid is a fixed placeholder and the handshake Secret holds a
placeholder key; the output says so in its first comment (on stderr with ``-o json``).
Invalid manifests, and those holding no DisaggregatedDeployment, exit 1 and print their
problems to stderr, one per line, ``field: message``. ``--platforms-file`` and
``--canary-image`` give the same settings the operator is started with (exit 2 when the
file is invalid).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from disagg_contract import commandline
from disagg_operator import api as models
from disagg_operator.commands import output
from disagg_operator.controller import options
from disagg_operator.engines.settings import Settings
from disagg_operator.render.objects import render
from disagg_operator.validation.spec import InvalidSpec, Problem

FAKE_UID = "00000000-0000-0000-0000-000000000000"
PLACEHOLDER_KEY = "placeholder-rendered-offline"
HEADER = (
    "# Rendered offline by `disagg render`: ownerReferences carry a placeholder uid\n"
    f"# ({FAKE_UID}) and the Secret a placeholder HMAC key; the operator uses the\n"
    "# custom resource's uid and a random key.\n"
)


def _documents(path: str) -> list[dict[str, Any]]:
    text = sys.stdin.read() if path == "-" else Path(path).read_text()
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render_documents(
    docs: list[dict[str, Any]], namespace: str | None, settings: Settings
) -> list[dict[str, Any]]:
    """Render every manifest; raise InvalidSpec with all problems of all of them."""
    out: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != models.KIND:
            kind = doc.get("kind") if isinstance(doc, dict) else type(doc).__name__
            problems.append(Problem("kind", f"{kind!r} is not a {models.KIND}; remove it"))
            continue
        body = dict(doc)
        meta = dict(body.get("metadata") or {})
        meta["uid"] = FAKE_UID
        meta["namespace"] = namespace or meta.get("namespace") or "default"
        body["metadata"] = meta
        try:
            out += render(body, hmac_key=PLACEHOLDER_KEY, settings=settings)
        except InvalidSpec as e:
            problems += e.problems
    if problems:
        raise InvalidSpec(problems)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="disagg render",
        description="Print every Kubernetes object a DisaggregatedDeployment renders to.",
        formatter_class=commandline.HelpFormatter,
    )
    what = "manifest (YAML, multi-document allowed; - for stdin)"
    commandline.add_manifest_arguments(parser, what, many=True)
    parser.add_argument("-n", "--namespace", help="namespace (default: the manifest's)")
    output.add_argument(parser)
    options.add_argument(parser)
    args = parser.parse_args(argv)
    paths = commandline.manifest_paths(parser, args, many=True)
    settings = options.settings(args, "disagg render")
    if settings is None:
        return 2
    try:
        docs = [doc for path in paths for doc in _documents(path)]
    except (OSError, yaml.YAMLError) as e:
        print(f"disagg render: {e}", file=sys.stderr)
        return 2
    if not any(isinstance(d, dict) and d.get("kind") == models.KIND for d in docs):
        print(
            f"disagg render: {' '.join(paths)} holds no {models.KIND}; give a manifest of "
            f"kind: {models.KIND} (e.g. examples/quickstart-cpu.yaml)",
            file=sys.stderr,
        )
        return 1
    try:
        objects = render_documents(docs, args.namespace, settings)
    except InvalidSpec as e:
        for problem in e.problems:
            print(problem, file=sys.stderr)
        return 1
    if args.output == "json":
        sys.stderr.write(HEADER.replace("# ", ""))
    else:
        sys.stdout.write(HEADER)
    sys.stdout.write(output.dumps(objects, args.output))
    return 0
