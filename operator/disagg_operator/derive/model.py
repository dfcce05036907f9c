"""Where the model comes from: ``spec.model`` as a URI, resolved into what the pods need.

The URIs follow llm-d's convention:

- ``hf://org/name[@revision]``: an init container downloads it once into the model volume
  (an emptyDir per pod, or the shared claim ``spec.modelCache.claimName``; the token from
  ``spec.modelCache.tokenSecret``); the engine loads ``/mnt/models/org/name``.
- ``pvc://claim[/path]``: the claim mounted read-only at ``/mnt/models``; the engine loads
  ``/mnt/models/path``.
- ``oci://image``: an image volume (Kubernetes >= 1.31 with the ImageVolume feature)
  mounted read-only at ``/mnt/models``; the engine loads it.
- a path (``/models/llama``): already in the image; a hub id (``org/name``): the engine
  downloads it at start. Nothing is mounted.

The engine serves it under one logical name (``spec.servedModelName``; by default the
hub id, or the last segment of the path, claim path or image repository), so clients,
the canary and llm-d's picker send the same name whatever the source.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from disagg_operator.api import DeploymentSpec

# A vLLM engine's start: initialisation, memory profiling, graph capture or compilation
# (minutes on large GPUs), then the weights from the volume (a network disk: 100 MB/s
# is conservative); a hub id the engine downloads itself comes over the network first.
START_BASE_S = 600
LOAD_BYTES_PER_S = 100e6
DOWNLOAD_BYTES_PER_S = 25e6
START_UNKNOWN_S = 1800  # no weightsMemory: 30 min
MODEL_DIR = "/mnt/models"  # where a mounted model lives in every engine container
MODEL_VOLUME = "model"
DOWNLOAD_CONTAINER = "model-download"
SCHEMES = ("hf", "pvc", "oci")
_HF = re.compile(r"^(?P<repo>[A-Za-z0-9][-\w.]*/[-\w.]+)(@(?P<revision>[-\w./]+))?$")
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_OCI = re.compile(r"^[a-z0-9][\w.:/-]*(@sha256:[0-9a-f]{64})?$")
# snapshot_download skips the files it already has: a restarted pod, or a second pod on a
# shared claim, downloads nothing twice.
_DOWNLOAD = (
    "import sys; from huggingface_hub import snapshot_download; "
    "snapshot_download(repo_id=sys.argv[1], revision=sys.argv[2] or None, local_dir=sys.argv[3])"
)


@dataclass(frozen=True)
class ModelSource:
    """What the pods need for ``spec.model``: the path the engine loads, the name it
    serves, and the volumes, mounts and init container that put the model there."""

    scheme: str  # hf, pvc, oci, or "" (a path or hub id the engine reads itself)
    path: str
    served_name: str
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    init: dict[str, Any] | None = None  # the download container, without its image


def scheme(model: str) -> str:
    head, sep, _ = model.partition("://")
    return head if sep else ""


def problem(model: str) -> str | None:
    """What is wrong with ``model`` as a source (None: nothing)."""
    kind, rest = scheme(model), model.partition("://")[2]
    if kind and kind not in SCHEMES:
        return (
            f"unknown scheme {kind}://; use hf://org/name, pvc://claim/path, oci://image or a path"
        )
    if kind == "hf" and not _HF.match(rest):
        return f"{model!r}: write hf://org/name or hf://org/name@revision"
    if kind == "pvc" and not _DNS.match(rest.partition("/")[0]):
        return f"{model!r}: write pvc://claim/path, the claim a PVC name in the namespace"
    if kind == "oci" and not _OCI.match(rest):
        return f"{model!r}: write oci://registry/repository:tag (or @sha256:...)"
    return None


def source(spec: DeploymentSpec) -> ModelSource:
    """The resolved source of a spec whose ``model`` has no :func:`problem`."""
    model, kind = spec.model, scheme(spec.model)
    rest = model.partition("://")[2]
    if kind == "hf":
        return _hf(spec, rest)
    volume: dict[str, Any]
    if kind == "pvc":
        claim, _, sub = rest.partition("/")
        path = f"{MODEL_DIR}/{sub}".rstrip("/")
        volume = {"persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
        default = sub.rstrip("/").rsplit("/", 1)[-1] or claim
    elif kind == "oci":
        path, volume = MODEL_DIR, {"image": {"reference": rest, "pullPolicy": "IfNotPresent"}}
        default = re.split(r"[:@]", rest.rsplit("/", 1)[-1])[0]
    else:
        served = spec.served_model_name or (
            model.rstrip("/").rsplit("/", 1)[-1] if model.startswith("/") else model
        )
        return ModelSource("", model, served)
    mount = {"name": MODEL_VOLUME, "mountPath": MODEL_DIR, "readOnly": True}
    return ModelSource(
        kind,
        path,
        spec.served_model_name or default,
        [{"name": MODEL_VOLUME, **volume}],
        [mount],
    )


def _hf(spec: DeploymentSpec, rest: str) -> ModelSource:
    found = _HF.match(rest)
    assert found is not None  # problem() refused anything else
    repo, revision = found["repo"], found["revision"] or ""
    path = f"{MODEL_DIR}/{repo}"
    cache = spec.model_cache
    claim = cache.claim_name if cache else None
    volume: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": claim}} if claim else {"emptyDir": {}}
    )
    env: list[dict[str, Any]] = [
        {"name": "HF_HOME", "value": f"{MODEL_DIR}/.hf-home"},
        {"name": "HF_HUB_DISABLE_TELEMETRY", "value": "1"},
    ]
    if cache and cache.token_secret:
        ref = {"name": cache.token_secret.name, "key": cache.token_secret.key}
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    init = {
        "name": DOWNLOAD_CONTAINER,
        "command": ["python3", "-c", _DOWNLOAD, repo, revision, path],
        "env": env,
        "volumeMounts": [{"name": MODEL_VOLUME, "mountPath": MODEL_DIR}],
    }
    return ModelSource(
        "hf",
        path,
        spec.served_model_name or repo,
        [{"name": MODEL_VOLUME, **volume}],
        [{"name": MODEL_VOLUME, "mountPath": MODEL_DIR, "readOnly": True}],
        init,
    )


def startup_seconds(spec: DeploymentSpec, role: str, weights: float) -> int:
    """The start budget of ``role``'s engine: spec.<role>.startupSeconds, else from the
    model's ``weights`` bytes (module constants); 30 min when they are not known."""
    given = spec.role(role).startup_seconds
    if given is not None:
        return given
    if weights <= 0:
        return START_UNKNOWN_S
    hub = not scheme(spec.model) and not spec.model.startswith("/")  # the engine downloads it
    rate = 1 / LOAD_BYTES_PER_S + (1 / DOWNLOAD_BYTES_PER_S if hub else 0)
    return int(START_BASE_S + weights * rate)
