"""The local EndpointSlice controller against the EndpointSlice controller's own tests:
the cases of k8s.io/endpointslice at tag v0.36.3 (Kubernetes 1.36) ``utils_test.go``,
``util/controller_utils_test.go`` and ``reconciler_test.go``, restated as data, each
named by its upstream function, and run against
:mod:`disagg_tools.local.kubelet.rules.endpoints`.

Left out: IPv6 and dual-stack Services (the local pods have IPv4 addresses only), and the
reconciler's metrics and its choices about which existing slice to update.
"""

from __future__ import annotations

from typing import Any

import pytest

from disagg_tools.local.kubelet.rules import endpoints as ep

UPSTREAM = "k8s.io/endpointslice v0.36.3"
NS = "test"


def new_pod(n: int, ready: bool = True, terminating: bool = False, **spec: Any) -> dict[str, Any]:
    """``newPod`` of utils_test.go: pod<n> at 1.2.3.<4+n> on node-1, label foo=bar."""
    meta: dict[str, Any] = {"namespace": NS, "name": f"pod{n}", "labels": {"foo": "bar"}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    ip = f"1.2.3.{4 + n}"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "container-1"}], "nodeName": "node-1", **spec},
        "status": {
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


# node1 of TestPodToEndpoint and TestReconcile1Pod: the pods' node, with a zone and a region
NODE1 = {"metadata": {"name": "node-1", "labels": {
    "topology.kubernetes.io/zone": "us-central1-a",
    "topology.kubernetes.io/region": "us-central1"}}}  # fmt: skip
ZONE = {"zone": "us-central1-a"}


def new_service(name: str = "foo", **spec: Any) -> dict[str, Any]:
    """``newServiceAndEndpointMeta``: port 80 named as the Service, selector foo=bar."""
    base = {
        "ports": [{"targetPort": 80, "protocol": "TCP", "name": name}],
        "selector": {"foo": "bar"},
        "ipFamilies": ["IPv4"],
    }
    return {"metadata": {"name": name, "namespace": NS, "uid": f"{NS}-{name}"}, "spec": base | spec}


def endpoint(
    name: str, ip: str, ready: bool, serving: bool, terminating: bool, **extra: Any
) -> Any:
    return {
        "addresses": [ip],
        "conditions": {"ready": ready, "serving": serving, "terminating": terminating},
        "targetRef": {"kind": "Pod", "namespace": NS, "name": name},
        "nodeName": "node-1",
        **extra,
    }


# ---------------------------------------------------------------- utils_test.go


def _pod_to_endpoint_cases() -> list[Any]:
    hostname = new_pod(1, subdomain="foo", hostname="example-hostname")
    multi = new_pod(1)
    multi["status"]["podIPs"] = [{"ip": "1.2.3.4"}, {"ip": "1234::5678:0000:0000:9abc:def0"}]
    publish = new_service("publishnotready", publishNotReadyAddresses=True)
    svc = new_service()
    ok, unready = (True, True, False), (False, False, False)
    rows = [  # (name, pod, node, service, expected endpoint) as TestPodToEndpoint lists them
        ("Ready pod", new_pod(1), None, svc, endpoint("pod1", "1.2.3.5", *ok)),
        ("Ready pod + publishNotReadyAddresses", new_pod(1), None, publish,
         endpoint("pod1", "1.2.3.5", *ok)),
        ("Unready pod", new_pod(1, ready=False), None, svc,
         endpoint("pod1", "1.2.3.5", *unready)),
        ("Unready pod + publishNotReadyAddresses", new_pod(1, ready=False), None, publish,
         endpoint("pod1", "1.2.3.5", True, False, False)),
        ("Ready pod + node labels", new_pod(1), NODE1, svc,
         endpoint("pod1", "1.2.3.5", *ok, **ZONE)),
        ("Multi IP Ready pod + node labels", multi, NODE1, svc,
         endpoint("pod1", "1.2.3.4", *ok, **ZONE)),
        ("Ready pod + hostname", hostname, NODE1, svc,
         endpoint("pod1", "1.2.3.5", *ok, hostname="example-hostname", **ZONE)),
        ("Ready pod", new_pod(1), None, svc, endpoint("pod1", "1.2.3.5", *ok)),
        ("Ready terminating pod", new_pod(1, terminating=True), None, svc,
         endpoint("pod1", "1.2.3.5", False, True, True)),
        ("Not ready terminating pod", new_pod(1, ready=False, terminating=True), None, svc,
         endpoint("pod1", "1.2.3.5", False, False, True)),
    ]  # fmt: skip
    return [pytest.param(pod, node, service, want, id=f"{i}-{name}")
            for i, (name, pod, node, service, want) in enumerate(rows)]  # fmt: skip


@pytest.mark.parametrize(("pod", "node", "service", "want"), _pod_to_endpoint_cases())
def test_pod_to_endpoint(pod: Any, node: Any, service: Any, want: Any) -> None:
    """TestPodToEndpoint."""
    assert ep.pod_to_endpoint(pod, service, node) == want


def _ports(**c: Any) -> dict[str, Any]:
    return {"ports": [{"name": n, "containerPort": p, "protocol": pr} for n, p, pr in c["ports"]]}


SIDECAR = {"restartPolicy": "Always"}
# TestFindPort: (name, containers, init containers, target port, expected; None: an error)
FIND_PORT = [
    ("valid int, no ports", [{}], [], 93, 93),
    ("valid int, with ports", [_ports(ports=[("", 11, "TCP"), ("p", 22, "TCP")])], [], 93, 93),
    ("valid str, no ports", [{}], [], "p", None),
    ("valid str, one ctr with ports",
     [_ports(ports=[("", 11, "UDP"), ("p", 22, "TCP"), ("q", 33, "TCP")])], [], "q", 33),
    ("valid str, two ctr with ports",
     [{}, _ports(ports=[("", 11, "UDP"), ("p", 22, "TCP"), ("q", 33, "TCP")])], [], "q", 33),
    ("valid str, two ctr with same port",
     [{}, _ports(ports=[("", 11, "UDP"), ("p", 22, "TCP"), ("q", 22, "TCP")])], [], "q", 22),
    ("valid str, invalid protocol", [{}, _ports(ports=[("a", 11, "snmp")])], [], "a", None),
    ("valid hostPort", [{}, _ports(ports=[("a", 11, "TCP")])], [], "a", 11),
    ("invalid hostPort", [{}, _ports(ports=[("a", 11, "TCP")])], [], "a", 11),
    ("invalid ContainerPort", [{}, _ports(ports=[("a", -1, "TCP")])], [], "a", -1),
    ("HostIP Address", [{}, _ports(ports=[("a", 11, "TCP")])], [], "a", 11),
    ("Sidecar initContainer named port", [], [SIDECAR | _ports(ports=[("a", 80, "TCP")])],
     "a", 80),
    ("Invalid(restartPolicy != Always) initContainer named port", [],
     [_ports(ports=[("a", 80, "TCP")])], "a", None),
    ("App and sidecar containers have the same named port, first app container port will be "
     "used", [_ports(ports=[("a", 81, "TCP")]), _ports(ports=[("a", 82, "TCP")])],
     [SIDECAR | _ports(ports=[("a", 80, "TCP")])], "a", 81),
]  # fmt: skip


@pytest.mark.parametrize(("name", "containers", "init", "target", "want"), FIND_PORT)
def test_find_port(name: str, containers: Any, init: Any, target: Any, want: int | None) -> None:
    """TestFindPort (its hostPort and hostIP are not read, so these rows omit them)."""
    pod = {"spec": {"containers": containers, "initContainers": init}}
    assert ep.find_port(pod, {"protocol": "TCP", "targetPort": target}) == want, name


def _container(*ports: tuple[str, int]) -> dict[str, Any]:
    return _ports(ports=[(n, p, "TCP") for n, p in ports])


# TestGetEndpointPorts: (name, service ports, pod spec, expected endpoint ports)
GET_ENDPOINT_PORTS = [
    ("service with AppProtocol on one port",
     [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP",
       "appProtocol": "example.com/custom-protocol"}],
     {"containers": [{"ports": []}]},
     [{"name": "http", "port": 80, "protocol": "TCP",
       "appProtocol": "example.com/custom-protocol"}]),
    ("service with named port and AppProtocol on one port",
     [{"name": "http", "port": 80, "targetPort": 80, "protocol": "TCP"},
      {"name": "https", "protocol": "TCP", "targetPort": "https", "appProtocol": "https"}],
     {"containers": [_container(("https", 443))]},
     [{"name": "http", "port": 80, "protocol": "TCP"},
      {"name": "https", "port": 443, "protocol": "TCP", "appProtocol": "https"}]),
    ("service with named port for restartable init container",
     [{"name": "http-sidecar", "port": 8080, "targetPort": 8080, "protocol": "TCP"},
      {"name": "http", "port": 8090, "targetPort": "http", "protocol": "TCP"}],
     {"initContainers": [SIDECAR | _container(("http-sidecar", 8080))],
      "containers": [_container(("http", 8090))]},
     [{"name": "http-sidecar", "port": 8080, "protocol": "TCP"},
      {"name": "http", "port": 8090, "protocol": "TCP"}]),
    ("service with same named port for regular and restartable init container",
     [{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}],
     {"initContainers": [SIDECAR | _container(("http", 8080))],
      "containers": [_container(("http", 8090))]},
     [{"name": "http", "port": 8090, "protocol": "TCP"}]),
]  # fmt: skip


@pytest.mark.parametrize(("name", "ports", "spec", "want"), GET_ENDPOINT_PORTS)
def test_get_endpoint_ports(name: str, ports: Any, spec: Any, want: Any) -> None:
    """TestGetEndpointPorts."""
    assert ep.endpoint_ports({"spec": {"ports": ports}}, {"spec": spec}) == want, name


# ---------------------------------------------------------------- util/controller_utils_test.go

# TestShouldPodBeInEndpoints: (name, phase, podIP, podIPs, terminating, includeTerminating, in)
SHOULD_BE_IN = [
    ("Failed pod with Never RestartPolicy", "Failed", "1.2.3.4", None, False, False, False),
    ("Succeeded pod with Never RestartPolicy", "Succeeded", "1.2.3.4", None, False, False, False),
    ("Succeeded pod with OnFailure RestartPolicy", "Succeeded", "1.2.3.4", None, False, False,
     False),
    ("Empty Pod IPs, Running pod with OnFailure RestartPolicy", "Running", "", [], False, False,
     False),
    ("Terminating Pod with includeTerminating=false", "Running", "1.2.3.4", None, True, False,
     False),
    ("Failed pod with Always RestartPolicy", "Failed", "1.2.3.4", None, False, False, False),
    ("Pending pod with Never RestartPolicy", "Pending", "1.2.3.4", None, False, False, True),
    ("Unknown pod with OnFailure RestartPolicy", "Unknown", "1.2.3.4", None, False, False, True),
    ("Running pod with Never RestartPolicy", "Running", "1.2.3.4", None, False, False, True),
    ("Multiple Pod IPs, Running pod with OnFailure RestartPolicy", "Running", "",
     [{"ip": "1.2.3.4"}, {"ip": "1234::5678:0000:0000:9abc:def0"}], False, False, True),
    ("Terminating Pod with includeTerminating=true", "Running", "1.2.3.4", None, True, True,
     True),
]  # fmt: skip


@pytest.mark.parametrize(("name", "phase", "ip", "ips", "going", "include", "want"), SHOULD_BE_IN)
def test_should_pod_be_in_endpoints(
    name: str, phase: str, ip: str, ips: Any, going: bool, include: bool, want: bool
) -> None:
    meta = {"deletionTimestamp": "2026-01-01T00:00:00Z"} if going else {}
    status = {"phase": phase, "podIP": ip} | ({"podIPs": ips} if ips is not None else {})
    pod = {"metadata": meta, "spec": {}, "status": status}
    assert ep.should_be_in_endpoints(pod, include) == want, name


# TestShouldSetHostname: (name, pod namespace, hostname, subdomain, service ns, name, set)
SET_HOSTNAME = [
    ("all matching", "ns", "foo", "svc-name", "ns", "svc-name", True),
    ("all matching, hostname not set", "ns", "", "svc-name", "ns", "svc-name", False),
    ("all set, different name/subdomain", "ns", "hostname", "subdomain", "ns", "name", False),
    ("all set, different namespace", "ns1", "hostname", "svc-name", "ns2", "svc-name", False),
]


@pytest.mark.parametrize(("name", "pns", "host", "sub", "sns", "svc", "want"), SET_HOSTNAME)
def test_should_set_hostname(
    name: str, pns: str, host: str, sub: str, sns: str, svc: str, want: bool
) -> None:
    pod = {"metadata": {"namespace": pns}, "spec": {"hostname": host, "subdomain": sub}}
    assert ep.should_set_hostname(pod, {"metadata": {"name": svc, "namespace": sns}}) == want


# ---------------------------------------------------------------- reconciler_test.go

HEADLESS = {ep.HEADLESS: ""}
# TestReconcile1Pod, IPv4 cases: (name, service, expected labels beyond the reserved two)
RECONCILE_1_POD = [
    ("no-family-service", new_service(clusterIP="10.0.0.10", ipFamilies=None), {}),
    ("ipv4", new_service(), HEADLESS),
    ("ipv4-clusterip", new_service(clusterIP="1.1.1.1"), {}),
    ("ipv4-labels", new_service() | {"metadata": {"name": "foo", "namespace": NS,
                                                  "labels": {"foo": "bar"}}},
     {"foo": "bar"} | HEADLESS),
    ("ipv4-bad-labels", new_service() | {"metadata": {"name": "foo", "namespace": NS, "labels": {
        ep.SERVICE_NAME: "bad", ep.MANAGED_BY_LABEL: "actor", ep.HEADLESS: "invalid"}}},
     HEADLESS),
]  # fmt: skip


@pytest.mark.parametrize(("name", "service", "extra"), RECONCILE_1_POD)
def test_reconcile_1_pod(name: str, service: Any, extra: dict[str, str]) -> None:
    """TestReconcile1Pod: one slice, its labels, its one endpoint (the pod's IPv4 of two;
    a hostname without a subdomain is not set; the zone of node1)."""
    pod = new_pod(1, hostname="example-hostname")
    pod["status"]["podIPs"] = [{"ip": "1.2.3.4"}, {"ip": "1234::5678:0000:0000:9abc:def0"}]
    (got,) = ep.endpoint_slices(service, [pod], {"node-1": NODE1})
    assert got["metadata"]["labels"] == {
        ep.MANAGED_BY_LABEL: ep.MANAGED_BY, ep.SERVICE_NAME: "foo", **extra
    }, name  # fmt: skip
    assert got["addressType"] == "IPv4"
    assert got["endpoints"] == [endpoint("pod1", "1.2.3.4", True, True, False, **ZONE)]


# TestReconcilerPodMissingNode: pod0 on node-0, pod1 on node-1; (name, publishNotReady,
# the nodes that exist, the endpoints desired). Its "Update ..." cases start from a slice
# holding both: the local controller writes the desired slice whole, so they are the same.
MISSING_NODE = [
    ("Create and publishNotReady false", False, ["node-0"], ["pod0"]),
    ("Create and publishNotReady true", True, ["node-0"], ["pod0", "pod1"]),
    ("Update and publishNotReady false", False, ["node-0"], ["pod0"]),
    ("Update and publishNotReady true and all nodes missing", True, [], ["pod0", "pod1"]),
    ("Update and publishNotReady true", True, ["node-0"], ["pod0", "pod1"]),
    ("Update if publishNotReady false and no nodes are present", False, [], []),
]


@pytest.mark.parametrize(("name", "publish", "nodes", "want"), MISSING_NODE)
def test_reconciler_pod_missing_node(
    name: str, publish: bool, nodes: list[str], want: list[str]
) -> None:
    """TestReconcilerPodMissingNode: a pod whose Node is missing is left out, unless the
    Service publishes not-ready addresses."""
    pods = [new_pod(0, nodeName="node-0"), new_pod(1, nodeName="node-1")]
    service = new_service(publishNotReadyAddresses=publish)
    slices = ep.endpoint_slices(service, pods, {n: {"metadata": {"name": n}} for n in nodes})
    got = [e["targetRef"]["name"] for s in slices for e in s["endpoints"]]
    assert got == want, name


def test_reconcile_empty() -> None:
    """TestReconcileEmpty: no pod, one placeholder slice with no ports and no endpoints."""
    (got,) = ep.endpoint_slices(new_service(), [])
    assert got["metadata"]["name"].startswith("foo")
    assert got["metadata"]["labels"][ep.SERVICE_NAME] == "foo"
    assert (got["ports"], got["endpoints"]) == ([], [])


def _many(n: int) -> list[dict[str, Any]]:
    return [new_pod(i, ready=i % 3 != 0) for i in range(n)]


def test_reconcile_1_endpoint_slice_publish_not_ready_addresses() -> None:
    """TestReconcile1EndpointSlicePublishNotReadyAddresses: 50 pods, a third unready, one
    slice of 50, every endpoint ready."""
    slices = ep.endpoint_slices(new_service(publishNotReadyAddresses=True), _many(50))
    assert [len(s["endpoints"]) for s in slices] == [50]
    assert all(e["conditions"]["ready"] for e in slices[0]["endpoints"])


def test_reconcile_many_pods() -> None:
    """TestReconcileManyPods: 250 pods make slices of 100, 100 and 50."""
    slices = ep.endpoint_slices(new_service(), _many(250))
    assert sorted(len(s["endpoints"]) for s in slices) == [50, 100, 100]


def test_reconcile_endpoint_slices_named_ports() -> None:
    """TestReconcileEndpointSlicesNamedPorts: 300 pods whose port "http" is one of five
    numbers make five slices of 60, each with its port."""
    service = new_service(ports=[{"targetPort": "http", "protocol": "TCP"}])
    pods = _many(300)
    for i, pod in enumerate(pods):
        pod["spec"]["containers"][0]["ports"] = [
            {"name": "http", "containerPort": 8080 + i % 5, "protocol": "TCP"}
        ]
    slices = ep.endpoint_slices(service, pods)
    assert [len(s["endpoints"]) for s in slices] == [60] * 5
    assert sorted(s["ports"][0]["port"] for s in slices) == [8080, 8081, 8082, 8083, 8084]
    assert all(s["ports"] == [{"name": "", "port": s["ports"][0]["port"], "protocol": "TCP"}]
               for s in slices)  # fmt: skip


def test_reconcile_headless_service_no_ports() -> None:
    """TestReconcileHeadlessServiceNoPorts: one slice, with the pod and no ports."""
    service = {"metadata": {"name": "headless-no-ports", "namespace": NS, "uid": "test-uid"},
               "spec": {"clusterIP": "None", "selector": {"foo": "bar"}}}  # fmt: skip
    (got,) = ep.endpoint_slices(service, [new_pod(1)])
    assert got["ports"] == [] and len(got["endpoints"]) == 1
    assert got["metadata"]["labels"][ep.HEADLESS] == ""
