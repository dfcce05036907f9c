"""The test verbs of the API emulator: what a kubelet, admission, a quota, API Priority and
Fairness or a missed watch event would do, said explicitly by a test or a benchmark.

Dev/bench tool, mixed into :class:`disagg_tools.emulator.server.Emulator` (whose store
primitives these call):

- :meth:`TestVerbs.set_pod_ready` plays the kubelet; :meth:`TestVerbs.roll_out_deployments`
  the Deployment controller, once its pods would be up;
- :meth:`TestVerbs.refuse` makes matching writes answer a code and a Status body, as
  admission or a quota would, until :meth:`TestVerbs.allow`; the refused calls are
  recorded like any call;
- :meth:`TestVerbs.throttle` answers the next N calls 429 with ``Retry-After``;
- :meth:`TestVerbs.lose_object` removes an object without a watch event;
  :meth:`TestVerbs.put_object` writes one without a recorded call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from disagg_tools.emulator.rules import ops
from disagg_tools.emulator.store import ObjectStore


class TestVerbs(ObjectStore):
    """Mixin over the emulator's :class:`ObjectStore` (its primitives ``_commit``,
    ``_insert``, ``_drop``): needs ``admission_rules`` and ``throttles`` of the emulator."""

    __test__ = False  # not a pytest test class
    admission_rules: list[ops.AdmissionRule]
    throttles: list[ops.Throttle]

    def set_pod_ready(
        self,
        namespace: str,
        name: str,
        ready: bool = True,
        containers: Mapping[str, bool] | None = None,
        ip: str | None = None,
    ) -> None:
        """Play the kubelet: mark a pod Running with a pod IP (``ip``, else one of
        127.0.1.0/24: loopback, so whatever dials it stays on this machine), each container
        of its spec ready or not (``containers``: by name, the others ``ready``), and the
        pod Ready when every container is, as the kubelet's readiness probes would leave it."""
        pod = self.store[("v1/pods", namespace, name)]
        statuses = [
            {  # what a kubelet writes of each container (image, imageID, restartCount required)
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "restartCount": 0,
                "ready": (containers or {}).get(c["name"], ready),
                "started": True,
                "state": {"running": {"startedAt": ops.now()}},
            }
            for c in (pod.get("spec") or {}).get("containers") or []
        ]
        pod_ready = all(s["ready"] for s in statuses) if statuses else ready
        flag = "True" if pod_ready else "False"
        status = {
            "phase": "Running",
            "podIP": ip or f"127.0.1.{len(self.store) % 250 + 1}",
            "conditions": [{"type": "Ready", "status": flag, "lastTransitionTime": ops.now()}],
            "containerStatuses": statuses,
        }
        self._commit("v1/pods", pod, ops.merge_patch(pod, {"status": status}))

    def set_group_ready(self, namespace: str, name: str, ready: bool = True) -> None:
        """Play the LeaderWorkerSet controller for LWS ``name``: every group of it ready
        (each of its pods Ready) or none."""
        key = "leaderworkerset.x-k8s.io/v1/leaderworkersets"
        obj = self.store[(key, namespace, name)]
        replicas = (obj.get("spec") or {}).get("replicas", 1)
        count = replicas if ready else 0
        status = {"replicas": replicas, "readyReplicas": count, "updatedReplicas": replicas}
        self._commit(key, obj, ops.merge_patch(obj, {"status": status}))

    def roll_out_deployments(self, namespace: str | None = None) -> list[str]:
        """Play the Deployment controller for every Deployment whose status is behind its
        spec: its status says the current template's replicas are all updated and
        available (``kubectl rollout status``'s test passes). The names it rolled."""
        done = []
        key = "apps/v1/deployments"
        for (ns, name), obj in list(self._index[key].items()):
            if namespace not in (None, ns):
                continue
            replicas = (obj.get("spec") or {}).get("replicas", 1)
            generation = obj["metadata"].get("generation", 1)
            status = {
                "observedGeneration": generation,
                **dict.fromkeys(
                    ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"),
                    replicas,
                ),
            }
            if {k: (obj.get("status") or {}).get(k) for k in status} != status:
                self._commit(key, obj, ops.merge_patch(obj, {"status": status}))
                done.append(name)
        return done

    def refuse(
        self,
        key: str,
        *,
        code: int,
        reason: str,
        message: str,
        verb: str = "create",
        namespace: str = "",
    ) -> ops.AdmissionRule:
        """Refuse ``verb`` on resource ``key`` from now on, as admission or a quota would:
        answer ``code`` with a Status of ``reason`` and ``message`` (``{name}``: the
        object's name). E.g. a quota: ``refuse("v1/pods", code=403, reason="Forbidden",
        message='pods "{name}" is forbidden: exceeded quota: q, ...')``."""
        rule = ops.AdmissionRule(key, verb, namespace, code, reason, message)
        self.admission_rules.append(rule)
        return rule

    def allow(self, rule: ops.AdmissionRule | None = None) -> None:
        """Lift one admission rule, or every one."""
        self.admission_rules[:] = (
            [] if rule is None else [r for r in self.admission_rules if r != rule]
        )

    def throttle(
        self, key: str, *, count: int, retry_after: int = 1, verb: str = ""
    ) -> ops.Throttle:
        """Answer the next ``count`` calls on resource ``key`` (with ``verb``; "": any)
        429 TooManyRequests with ``Retry-After: retry_after``, as API Priority and
        Fairness rejects a request; the rejected calls are recorded like any other."""
        rule = ops.Throttle(key, verb, count, retry_after)
        self.throttles.append(rule)
        return rule

    def lose_object(self, key: str, namespace: str, name: str) -> None:
        """Remove an object with no watch event: what a client sees after a missed event."""
        self._drop(key, self.store[(key, namespace, name)])

    def put_object(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace the stored object of its name, as a client's POST or
        PUT would (admission, defaults, schema and CEL rules, ``fieldValidation=Strict``),
        then its ``status`` as a write to the status subresource would; nothing is
        recorded as a call. A refusal raises what the API server would answer."""
        meta = obj.setdefault("metadata", {})
        ns = meta.get("namespace", "")
        exists = (key, ns, meta["name"]) in self.store
        written = self._local("PUT" if exists else "POST", key, ns, meta["name"], "", obj)
        gone = (key, ns, meta["name"]) not in self.store  # the write ended a deletion
        if obj.get("status") is not None and self._has_status(key) and not gone:
            status = {**written, "status": obj["status"]}
            written = self._local("PUT", key, ns, meta["name"], "status", status)
        return written

    def put_stored(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Put ``obj`` in the store as it is, around admission: what an API server still
        holds from before its CRD changed (objects are not checked again until they are
        written). For a test of such an object; any other write goes through
        :meth:`put_object`."""
        meta = obj.setdefault("metadata", {})
        old = self.store.get((key, meta.get("namespace", ""), meta["name"]))
        if old is None:
            return self._insert(key, obj)
        return self._commit(key, old, obj)

    def _local(
        self, method: str, key: str, ns: str, name: str, sub: str, obj: dict[str, Any]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _has_status(self, key: str) -> bool:
        raise NotImplementedError
