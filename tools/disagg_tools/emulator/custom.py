"""The API emulator's writes of custom resources: kube-apiserver's decoding, defaulting and
validation of every resource a CRD serves.

Dev/bench tool, mixed into :class:`disagg_tools.emulator.server.Emulator` (which holds
``served``, filled by ``register_crd``). It sequences the pure rules of
:mod:`disagg_tools.emulator.apiserver.writes` over each request: a create or PUT body is
decoded from its bytes (duplicate keys, unknown fields: ``fieldValidation``), a patch is
applied to the stored object and the result decoded again, then defaults, the strategy
(status subresource) and validation run, as upstream orders them. Warnings accumulate in the
list the request handler turns into ``Warning`` headers.
"""

from __future__ import annotations

from typing import Any

from disagg_tools.emulator.apiserver import decoding, writes
from disagg_tools.emulator.apiserver.strategy import Served
from disagg_tools.emulator.rules import ops
from disagg_tools.emulator.watch import Req


class CustomResources:
    """Mixin: the custom-resource side of create, update, patch, apply and status."""

    served: dict[str, Served]

    def _new_body(self, served: Served | None, req: Req, warnings: list[str]) -> Any:
        """A create's (or a creating apply's) object, decoded as the apiserver decodes it."""
        if served is None:
            return req.payload()
        if "apply-patch" in req.ctype:
            body = req.payload()
            writes.check_apply(served, body)
            if not isinstance(body, dict):
                return body
            body.setdefault("apiVersion", f"{served.group}/{served.version}")
            body.setdefault("kind", served.kind)
            return writes.decode_patched(served, body, [], req.params).obj
        decoded = writes.decode_object(served, req.body, req.ctype, req.params, "CreateOptions")
        warnings.extend(decoded.warnings)
        return decoded.obj

    def _updated(
        self, key: str, req: Req, current: dict[str, Any], warnings: list[str]
    ) -> dict[str, Any]:
        """The object a PUT or PATCH asks for, before the strategy: for a custom resource
        decoded, pruned and defaulted, with the strict errors the directive allows."""
        served = self.served.get(key)
        if served is None:
            return ops.updated(req.raw.method, req.ctype, req.payload(), current)
        if req.raw.method == "PATCH":
            writes.check_patch_type(req.ctype)
        if req.raw.method == "PUT":
            decoded = writes.decode_object(served, req.body, req.ctype, req.params, "UpdateOptions")
            ops.updated("PUT", req.ctype, decoded.obj, current)  # the resourceVersion precondition
        elif "apply-patch" in req.ctype:
            writes.check_apply(served, req.payload())
            new = ops.updated(req.raw.method, req.ctype, req.payload(), current)
            decoded = writes.decode_patched(served, new, [], req.params)
        else:
            patch, duplicates = decoding.parse(req.body, req.ctype)
            problems = duplicates
            if "json-patch" in req.ctype:
                problems = [*decoding.json_patch_errors(patch), *duplicates]
                problems = [
                    p if p.startswith("json patch") else f"json patch {p}" for p in problems
                ]
            new = ops.updated(req.raw.method, req.ctype, patch, current)
            decoded = writes.decode_patched(served, new, problems, req.params)
        warnings.extend(decoded.warnings)
        return decoded.obj

    def _admit_write(
        self,
        served: Served,
        current: dict[str, Any],
        new: dict[str, Any],
        req: Req,
        warnings: list[str],
    ) -> dict[str, Any]:
        """The strategy of the endpoint written (status or main; scale writes the main
        resource) and its validation; the object to store."""
        if req.where.subresource == "status":
            stored, found = writes.admit_status(served, new, current)
            warnings.extend(found)
            return stored
        warnings.extend(writes.admit_update(served, new, current))
        return new
