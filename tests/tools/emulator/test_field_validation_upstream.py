"""kube-apiserver's own integration cases for ``fieldValidation`` on custom resources,
replayed over HTTP against the emulator: the same CRD (``crdSchemaBase``), the same bodies
with their duplicate keys and unknown fields, the same answers (strict errors contained in
the message; warnings exactly, in order). Data: :mod:`.apiserver.upstream_field_validation`.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

from tests.support.emulator import Emulator
from tests.tools.emulator.apiserver import upstream_field_validation as upstream

VERSION, PLURAL, KIND = "v1beta1", "noxus", "WishIHadChosenNoxu"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY = "application/apply-patch+yaml"


def _group(schemaless: bool) -> str:
    return "schemaless.example.com" if schemaless else "schema.example.com"


def _crd(schemaless: bool) -> dict[str, Any]:
    """``setupCRD``: the noxu fixture, cluster-scoped, in the test's group and schema."""
    group = _group(schemaless)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": PLURAL, "singular": "nonenglishnoxu", "kind": KIND},
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": upstream.crd_schema(schemaless),
                }
            ],
        },
    }


def _text(warning: str) -> str:
    """A ``Warning`` header's text: ``299 - "<text>"`` unquoted."""
    quoted = warning.split(" ", 2)[2]
    return quoted[1:-1].replace('\\"', '"').replace("\\\\", "\\")


async def _send(
    emu: Emulator, method: str, path: str, body: str, ctype: str, params: dict[str, str]
) -> tuple[int, dict[str, Any], list[str]]:
    headers = {"Content-Type": ctype}
    async with (
        aiohttp.ClientSession(str(emu.url)) as http,
        http.request(method, path, data=body.encode(), params=params, headers=headers) as resp,
    ):
        found = [_text(w) for w in resp.headers.getall("Warning", [])]
        return resp.status, await resp.json(content_type=None), found


def _object(api_version: str, name: str, spec: str, rv: str = "%!s(MISSING)") -> str:
    """``crdInvalidBody`` / ``crdValidBody`` (Sprintf leaves resourceVersion missing on POST)."""
    meta = json.dumps({"name": name, "resourceVersion": rv})
    return (
        f'{{"apiVersion": "{api_version}", "kind": "{KIND}", "metadata": {meta}, "spec": {spec}}}'
    )


async def _request(emu: Emulator, case: dict[str, Any], name: str) -> Any:
    group = _group(case["schemaless"])
    api_version, base = f"{group}/{VERSION}", f"/apis/{group}/{VERSION}/{PLURAL}"
    params = {"fieldValidation": case["directive"]} if case["directive"] else {}
    if case["verb"] == "post":
        return await _send(
            emu, "POST", base, _object(api_version, name, case["body"]), "application/json", params
        )
    if case["verb"] == "put":
        valid = _object(api_version, name, json.dumps(upstream.VALID_SPEC), "")
        code, created, _ = await _send(emu, "POST", base, valid, "application/json", params)
        assert code == 201, created
        rv = created["metadata"]["resourceVersion"]
        body = _object(api_version, name, case["body"], rv)
        return await _send(emu, "PUT", f"{base}/{name}", body, "application/json", params)
    applied = {
        "apiVersion": api_version,
        "kind": KIND,
        "metadata": {"name": name, "finalizers": ["test-finalizer"]},
        "spec": upstream.APPLIED_SPEC,
    }
    code, created, _ = await _send(
        emu, "PATCH", f"{base}/{name}", json.dumps(applied), APPLY, {"fieldManager": "apply_test"}
    )
    assert code in (200, 201), created
    if case["verb"] == "merge":
        return await _send(
            emu, "PATCH", f"{base}/{name}", f'{{"spec": {case["body"]}}}', MERGE, params
        )
    return await _send(emu, "PATCH", f"{base}/{name}", case["body"], JSON_PATCH, params)


CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"
IDS = [f"{c['test']}/{c['verb']}/{c['directive'] or 'absent'}" for c in upstream.CASES]


@pytest.mark.parametrize("case", upstream.CASES, ids=IDS)
async def test_upstream_field_validation_case(emulator: Emulator, case: dict[str, Any]) -> None:
    emulator.put_object(CRDS, _crd(case["schemaless"]))  # through CRD admission
    code, answer, warnings = await _request(emulator, case, "noxu")
    if "errors" in case:
        assert code >= 400, answer
        missing = [e for e in case["errors"] if e not in answer["message"]]
        assert missing == [], answer["message"]
    else:
        assert code == 200 or code == 201, answer
        assert warnings == case["warnings"]
