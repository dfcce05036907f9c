"""The emulator treats a DisaggregatedDeployment as kube-apiserver v1.36 does on every write:
unknown fields by ``fieldValidation``, defaults, schema and CEL validation with upstream's
messages, transition rules, ratcheting, the status subresource, dryRun.

Real HTTP against the ``emulator`` fixture, which serves the CRD from crds/. The codes and
messages asserted are the ones k8s.io/apiserver and apiextensions-apiserver v0.36.3 give
(see :mod:`disagg_tools.emulator.apiserver.writes`).
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from tests.operator.builders import body as dd_body
from tests.support.emulator import Emulator

BASE = "/apis/disagg.dev/v1alpha1/namespaces/ns1/disaggregateddeployments"
KEY = "disagg.dev/v1alpha1/disaggregateddeployments"
MERGE = {"Content-Type": "application/merge-patch+json"}
AUTO = {
    "targets": {"ttftMilliseconds": 1000, "itlMilliseconds": 50},
    "profile": {"configMap": "pools"},
    "prefill": {"max": 4},
    "decode": {"max": 8},
}


def _dd(name: str = "d", **spec: Any) -> dict[str, Any]:
    obj = dd_body(name, **spec)
    obj["metadata"] = {"name": name}
    return obj


async def _call(
    emu: Emulator,
    method: str,
    path: str,
    body: Any = None,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, Any, list[str]]:
    """(status, JSON body, Warning headers)."""
    async with (
        aiohttp.ClientSession(str(emu.url)) as http,
        http.request(
            method,
            path,
            json=None if raw is not None else body,
            data=raw,
            params=params or {},
            headers={"Content-Type": "application/json", **(headers or {})},
        ) as resp,
    ):
        return resp.status, await resp.json(content_type=None), resp.headers.getall("Warning", [])


def _with_unknown(obj: dict[str, Any]) -> dict[str, Any]:
    unknown = copy.deepcopy(obj)
    unknown["spec"]["foo"] = "bar"
    unknown["spec"]["prefill"]["tensorParallel"] = 2  # a misspelt tensorParallelSize
    return unknown


async def test_strict_refuses_an_unknown_field_with_the_apiservers_400(emulator: Emulator) -> None:
    """kubectl's default (Strict): a create answers 400 BadRequest (upstream's code, not 422)
    naming every unknown field, and stores nothing."""
    code, err, _ = await _call(
        emulator, "POST", BASE, _with_unknown(_dd()), {"fieldValidation": "Strict"}
    )
    assert (code, err["reason"]) == (400, "BadRequest")
    assert err["message"] == (
        'DisaggregatedDeployment in version "v1alpha1" cannot be handled as a '
        'DisaggregatedDeployment: strict decoding error: unknown field "spec.foo", '
        'unknown field "spec.prefill.tensorParallel"'
    )
    assert emulator.find(KEY, "ns1", "d") is None


async def test_strict_refuses_an_unknown_field_in_a_patch_with_422(emulator: Emulator) -> None:
    """A merge patch under Strict answers 422 on the field ``patch`` (apiserver patch.go)."""
    assert (await _call(emulator, "POST", BASE, _dd()))[0] == 201
    code, err, _ = await _call(
        emulator, "PATCH", f"{BASE}/d", {"spec": {"foo": 1}}, {"fieldValidation": "Strict"}, MERGE
    )
    assert (code, err["reason"]) == (422, "Invalid")
    assert err["message"].startswith(' "" is invalid: patch: Invalid value: "{')
    assert err["message"].endswith('": strict decoding error: unknown field "spec.foo"')
    assert [c["field"] for c in err["details"]["causes"]] == ["patch"]
    assert "foo" not in emulator.find(KEY, "ns1", "d")["spec"]  # type: ignore[index]


async def test_a_strategic_merge_patch_is_an_unsupported_media_type(emulator: Emulator) -> None:
    """Custom resources take JSON, merge and apply patches only (415 otherwise)."""
    assert (await _call(emulator, "POST", BASE, _dd()))[0] == 201
    smp = {"Content-Type": "application/strategic-merge-patch+json"}
    code, err, _ = await _call(
        emulator, "PATCH", f"{BASE}/d", {"spec": {"paused": True}}, headers=smp
    )
    assert (code, err["reason"]) == (415, "UnsupportedMediaType")
    assert err["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
    )


async def test_warn_prunes_the_unknown_field_and_says_so_in_a_warning(emulator: Emulator) -> None:
    """Warn, and no fieldValidation at all (the apiserver's default): 201, one Warning
    header per field, and the fields are gone from what is stored and returned."""
    for name, params in (("w", {"fieldValidation": "Warn"}), ("absent", {})):
        code, created, warnings = await _call(
            emulator, "POST", BASE, _with_unknown(_dd(name)), params
        )
        assert code == 201
        assert warnings == [
            '299 - "unknown field \\"spec.foo\\""',
            '299 - "unknown field \\"spec.prefill.tensorParallel\\""',
        ]
        stored = emulator.find(KEY, "ns1", name)
        assert stored is not None and "foo" not in stored["spec"] and "foo" not in created["spec"]
        assert "tensorParallel" not in stored["spec"]["prefill"]


async def test_ignore_prunes_the_unknown_field_in_silence(emulator: Emulator) -> None:
    code, _, warnings = await _call(
        emulator, "POST", BASE, _with_unknown(_dd()), {"fieldValidation": "Ignore"}
    )
    assert (code, warnings) == (201, [])
    stored = emulator.find(KEY, "ns1", "d")
    assert stored is not None and "foo" not in stored["spec"]


async def test_a_duplicate_key_is_a_strict_error_and_an_unknown_directive_is_refused(
    emulator: Emulator,
) -> None:
    raw = b'{"metadata": {"name": "d"}, "spec": {"model": "a", "model": "b"}}'
    code, err, _ = await _call(
        emulator, "POST", BASE, raw=raw, params={"fieldValidation": "Strict"}
    )
    assert code == 400 and 'strict decoding error: duplicate field "model"' in err["message"]
    code, err, _ = await _call(emulator, "POST", BASE, _dd(), {"fieldValidation": "Loose"})
    assert (code, err["message"]) == (
        422,
        'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loose": '
        'supported values: "", "Ignore", "Strict", "Warn"',
    )


async def test_a_wrong_type_is_refused_with_the_apiservers_message(emulator: Emulator) -> None:
    bad = _dd()
    bad["spec"]["prefill"]["replicas"] = "two"
    code, err, _ = await _call(emulator, "POST", BASE, bad)
    assert (code, err["reason"]) == (422, "Invalid")
    assert err["message"] == (
        'DisaggregatedDeployment.disagg.dev "d" is invalid: [spec.prefill.replicas: Invalid '
        'value: "string": spec.prefill.replicas in body must be of type integer: "string", '
        "<nil>: Invalid value: null: some validation rules were not checked because the object "
        "was invalid; correct the existing errors to complete validation]"
    )
    assert err["details"]["causes"][0] == {
        "reason": "FieldValueTypeInvalid",
        "message": 'Invalid value: "string": spec.prefill.replicas in body must be of type '
        'integer: "string"',
        "field": "spec.prefill.replicas",
    }
    negative = _dd()
    negative["spec"]["prefill"]["replicas"] = -1
    code, err, _ = await _call(emulator, "POST", BASE, negative)
    assert err["message"] == (
        'DisaggregatedDeployment.disagg.dev "d" is invalid: spec.prefill.replicas: Invalid '
        "value: -1: spec.prefill.replicas in body should be greater than or equal to 0"
    )


async def test_a_failing_cel_rule_of_the_crd_is_refused(emulator: Emulator) -> None:
    bad = _dd(kvTransfer={"backends": ["UCX", "UCX"]})
    code, err, _ = await _call(emulator, "POST", BASE, bad)
    assert (code, err["reason"]) == (422, "Invalid")
    assert err["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: spec.kvTransfer.backends: lists a backend twice; list "
            "each NIXL backend once",
            "field": "spec.kvTransfer",
        }
    ]


async def test_a_transition_rule_runs_on_update_only(emulator: Emulator) -> None:
    """spec.decode.replicas may not change while spec.autoscaling plans it: a create passes
    (no oldSelf), the update that changes it does not, one that keeps it does."""
    obj = _dd(autoscaling=AUTO, monitoring={"enabled": True})
    assert (await _call(emulator, "POST", BASE, obj))[0] == 201
    scaled = {"spec": {"decode": {"replicas": 3}}}
    code, err, _ = await _call(emulator, "PATCH", f"{BASE}/d", scaled, headers=MERGE)
    assert code == 422
    assert [c["field"] for c in err["details"]["causes"]] == ["spec"]
    assert "spec.autoscaling plans the pod counts" in err["message"]
    code, _, _ = await _call(
        emulator, "PATCH", f"{BASE}/d", {"spec": {"paused": True}}, headers=MERGE
    )
    assert code == 200


async def test_an_update_ratchets_what_it_leaves_unchanged(emulator: Emulator) -> None:
    """An object stored before a rule existed (put_stored: around admission) still takes an update
    that leaves the offending value alone, with the failure as a warning; an update that
    changes it to another bad value is refused."""
    stored = _dd(kvTransfer={"backends": ["UCX", "UCX"]})
    stored["metadata"]["namespace"] = "ns1"
    emulator.put_stored(KEY, stored)
    code, _, warnings = await _call(
        emulator, "PATCH", f"{BASE}/d", {"spec": {"paused": True}}, headers=MERGE
    )
    assert code == 200
    assert any("lists a backend twice" in w for w in warnings)
    again = {"spec": {"kvTransfer": {"backends": ["LIBFABRIC", "LIBFABRIC"]}}}
    code, err, _ = await _call(emulator, "PATCH", f"{BASE}/d", again, headers=MERGE)
    assert code == 422 and "lists a backend twice" in err["message"]


async def test_a_status_write_is_checked_against_the_status_schema(emulator: Emulator) -> None:
    """/status validates status against the schema's status (paths under ``status``) and
    changes nothing else; the main resource ignores status."""
    assert (await _call(emulator, "POST", BASE, _dd()))[0] == 201
    bad = {"status": {"replicas": "x"}}
    code, err, _ = await _call(emulator, "PATCH", f"{BASE}/d/status", bad, headers=MERGE)
    assert code == 422
    assert err["details"]["causes"][0]["field"] == "status.replicas"
    good = {"status": {"replicas": 2}, "spec": {"paused": True}}
    code, _, _ = await _call(emulator, "PATCH", f"{BASE}/d/status", good, headers=MERGE)
    assert code == 200
    stored = emulator.find(KEY, "ns1", "d")
    assert stored is not None and stored["status"] == {"replicas": 2}
    assert stored["spec"]["paused"] is False  # the status endpoint left spec alone
    main = {"status": {"replicas": 5}}
    assert (await _call(emulator, "PATCH", f"{BASE}/d", main, headers=MERGE))[0] == 200
    assert emulator.find(KEY, "ns1", "d")["status"] == {"replicas": 2}  # type: ignore[index]


async def test_defaults_are_applied_on_create_and_a_null_with_a_default_is_defaulted(
    emulator: Emulator,
) -> None:
    """What a cluster stores: the schema's defaults, read back; ``kvTransfer: null`` on a
    non-nullable object with ``default: {}`` becomes the defaulted object."""
    obj = _dd()
    obj["spec"]["kvTransfer"] = None
    code, created, _ = await _call(emulator, "POST", BASE, obj)
    assert code == 201
    code, read, _ = await _call(emulator, "GET", f"{BASE}/d")
    assert read["spec"] == created["spec"]
    kv = read["spec"]["kvTransfer"]
    assert kv["backends"] == ["UCX"] and kv["connector"] == "NixlConnector"
    assert kv["blockLeaseSeconds"] == 30.0 and kv["transferDeadlineSeconds"] == 10.0
    assert read["spec"]["paused"] is False


async def test_dry_run_runs_the_same_checks_and_stores_nothing(emulator: Emulator) -> None:
    bad = _dd(kvTransfer={"backends": ["UCX", "UCX"]})
    code, err, _ = await _call(emulator, "POST", BASE, bad, {"dryRun": "All"})
    assert (code, err["reason"]) == (422, "Invalid")
    code, dry, warnings = await _call(
        emulator, "POST", BASE, _with_unknown(_dd()), {"dryRun": "All"}
    )
    assert code in (200, 201) and len(warnings) == 2 and "foo" not in dry["spec"]
    assert dry["spec"]["kvTransfer"]["backends"] == ["UCX"]
    assert emulator.find(KEY, "ns1", "d") is None


async def test_server_side_apply_refuses_an_unknown_field_whatever_the_directive(
    emulator: Emulator,
) -> None:
    """Apply's typed conversion fails on an undeclared field (500), even under Ignore."""
    apply = {"Content-Type": "application/apply-patch+yaml"}
    params = {"fieldManager": "test", "fieldValidation": "Ignore"}
    raw = yaml.safe_dump(_with_unknown(_dd())).encode()
    code, err, _ = await _call(
        emulator, "PATCH", f"{BASE}/d", params=params, headers=apply, raw=raw
    )
    assert code == 500
    assert err["message"] == (
        "failed to create typed patch object (/d; disagg.dev/v1alpha1, "
        "Kind=DisaggregatedDeployment): errors:\n  .spec.foo: field not declared in schema\n"
        "  .spec.prefill.tensorParallel: field not declared in schema"
    )


async def test_kubectl_create_is_strict_about_unknown_fields(
    emulator: Emulator, kubeconfig_path: Path, tmp_path: Path
) -> None:
    """kubectl sends fieldValidation=Strict: what it prints for a misspelt field."""
    manifest = tmp_path / "dd.yaml"
    manifest.write_text(yaml.safe_dump(_with_unknown(_dd())))
    proc = await asyncio.create_subprocess_exec(
        "kubectl", "create", "-n", "ns1", "-f", str(manifest),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode != 0, out
    assert b'strict decoding error: unknown field "spec.foo"' in err
    assert emulator.find(KEY, "ns1", "d") is None
