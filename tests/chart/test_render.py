"""The chart rendered by the real Helm engine: objects, security posture, modes, toggles."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.chart.chartkit import (
    FULL_VALUES,
    NAMESPACE,
    VALUE_SETS,
    grants,
    kinds,
    one,
    render_files,
)


def _container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["operator"]
    return containers[0]


def test_default_install_is_all_namespaces_mode(render):
    objs = render()
    assert kinds(objs) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "PodDisruptionBudget",
        "Role",  # the leader-election Lease's, in the release namespace
        "RoleBinding",
        "Secret",
        "Service",
        "ServiceAccount",
    ]
    args = _container(objs)["args"]
    assert "--all-namespaces" in args
    assert not any(a.startswith("--namespace") for a in args)


def test_namespaced_mode_grants_children_only_in_watched_namespaces(render):
    objs = render({"watchNamespaces": ["team-a", "team-b"]})
    roles = [o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "disagg"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    bindings = [o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "disagg"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-a", "team-b"]
    args = _container(objs)["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args
    assert "--all-namespaces" not in args
    cluster_wide = {g for g in grants(objs, "disagg") if g[0] == ""}
    # Cluster-wide, only cluster-scoped reads: no pods, secrets, or custom resources.
    assert {g[2] for g in cluster_wide} <= {"customresourcedefinitions", "namespaces"}
    assert {g[3] for g in cluster_wide} <= {"get", "list", "watch"}
    in_a = {g[1:] for g in grants(objs, "disagg") if g[0] == "team-a"}
    assert ("", "secrets", "create") in in_a
    assert ("disagg.dev", "disaggregateddeployments", "watch") in in_a


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_no_wildcards_and_no_escalation_verbs(render, name):
    for obj in render(VALUE_SETS[name]):
        for rule in obj.get("rules", []):
            flat = [*rule["apiGroups"], *rule["resources"], *rule["verbs"]]
            assert "*" not in flat, f"{obj['kind']} {obj['metadata']['name']}: wildcard {rule}"
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
            assert "nonResourceURLs" not in rule


def test_inferencepools_are_written_only_with_llmd(render):
    def pool_verbs(values: dict[str, Any]) -> set[str]:
        return {g[3] for g in grants(render(values), "disagg") if g[2] == "inferencepools"}

    assert pool_verbs({}) == set()  # a deployment without llm-d looks no pool up
    assert pool_verbs({"llmd": {"enabled": True}}) == {"get", "create", "patch", "delete"}


def test_inferencepool_rules_name_the_group_of_each_chosen_version(render):
    def pool_groups(values: dict[str, Any]) -> set[str]:
        return {g[1] for g in grants(render(values), "disagg") if g[2] == "inferencepools"}

    assert pool_groups({}) == set()
    assert pool_groups({"llmd": {"enabled": True}}) == {"inference.networking.k8s.io"}  # v1


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_operator_pod_security_posture(render, name):
    objs = render(VALUE_SETS[name])
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = _container(objs)["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)


def test_default_is_two_replicas_with_leader_election_rolled_one_at_a_time(render):
    objs = render()
    deploy = one(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    args = _container(objs)["args"]
    assert "--leader-elect" in args
    assert "--lease-name=disagg" in args and f"--lease-namespace={NAMESPACE}" in args
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in _container(objs)["env"]}
    assert env == {"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace"}
    labels = deploy["spec"]["template"]["metadata"]["labels"]
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["metadata"]["namespace"] == NAMESPACE and pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()


def test_the_lease_is_granted_in_the_release_namespace_only(render):
    for values in ({}, {"watchNamespaces": ["team-a"]}):
        objs = render(values)
        leases = {g for g in grants(objs, "disagg") if g[2] == "leases"}
        assert leases == {
            (NAMESPACE, "coordination.k8s.io", "leases", v) for v in ("get", "create", "update")
        }
        role = next(
            o
            for o in objs
            if o["metadata"]["name"] == "disagg-leader-election" and o["kind"] == "Role"
        )
        named = [r for r in role["rules"] if "get" in r["verbs"]]
        assert named == [{**named[0], "resourceNames": ["disagg"]}]  # this release's Lease only


def test_one_replica_without_election_is_replaced_not_rolled(render):
    objs = render({"replicaCount": 1, "leaderElection": {"enabled": False}})
    deploy = one(objs, "Deployment")
    assert deploy["spec"]["replicas"] == 1
    assert deploy["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(
        a.startswith("--lease") or a == "--leader-elect" for a in _container(objs)["args"]
    )
    assert "affinity" not in deploy["spec"]["template"]["spec"]
    assert {"PodDisruptionBudget", "Role", "RoleBinding"}.isdisjoint(kinds(objs))


def test_a_user_pod_anti_affinity_replaces_the_default_spread(render):
    mine = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": []}}
    pod = one(render({"affinity": mine}), "Deployment")["spec"]["template"]["spec"]
    assert pod["affinity"] == mine


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"leaderElection": {"enabled": False}},
            "replicaCount: 2 replicas need leaderElection.enabled",
        ),
        ({"leaderElection": {"renewDeadlineSeconds": 10}}, "renewDeadlineSeconds must be below"),
        (
            {"leaderElection": {"retryPeriodSeconds": 7}},
            "above 1.2 x leaderElection.retryPeriodSeconds",
        ),
    ],
)
def test_unsafe_election_values_fail_naming_the_keys(chart, values, message):
    with pytest.raises(Exception, match=re.escape(message)):
        render_files(chart, values)


@pytest.mark.parametrize("name", ["default", "full"])
def test_probes_and_ports_follow_values(render, name):
    values = VALUE_SETS[name]
    health = values.get("health", {}).get("port", 8080)
    metrics = values.get("metrics", {}).get("port", 9090)
    objs = render(values)
    container = _container(objs)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": health, "metrics": metrics}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert f"--health-port={health}" in container["args"]
    assert f"--metrics-port={metrics}" in container["args"]
    assert container["resources"]["requests"]
    service = one(objs, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    selector = service["spec"]["selector"]
    pod_labels = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert selector.items() <= pod_labels.items()


def test_non_default_values_reach_the_pod(render):
    objs = render(FULL_VALUES)
    deploy = one(objs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    container = _container(objs)
    assert container["image"] == "registry.example/disagg-operator:v9"
    assert container["imagePullPolicy"] == "Always"
    assert "--log-level=debug" in container["args"]
    assert container["args"][-1] == "--log-level=error"
    assert "--canary-image=registry.example/disagg-worker-cpu:v9" in container["args"]
    # on by default: the release's own worker image, at the operator's tag
    assert (
        "--canary-image=ghcr.io/disagg-dev/disagg-worker-cpu:0.1.0" in _container(render())["args"]
    )
    tagged = _container(render({"image": {"tag": "v2"}}))["args"]
    assert "--canary-image=ghcr.io/disagg-dev/disagg-worker-cpu:v2" in tagged
    off = _container(render({"transferCanary": {"enabled": False}}))["args"]
    assert not any(a.startswith("--canary-image") for a in off)
    assert "--prometheus-url=http://prometheus-operated.monitoring:9090" in container["args"]
    assert not any(a.startswith("--prometheus-url") for a in _container(render())["args"])
    assert pod["serviceAccountName"] == "dd-sa"
    assert one(objs, "ServiceAccount")["metadata"]["name"] == "dd-sa"
    for key in ("nodeSelector", "tolerations", "priorityClassName"):
        assert pod[key] == FULL_VALUES[key]
    assert pod["affinity"]["nodeAffinity"] == FULL_VALUES["affinity"]["nodeAffinity"]
    assert "podAntiAffinity" in pod["affinity"]  # 3 replicas: spread added to the user's
    assert deploy["spec"]["replicas"] == 3
    assert "--renew-deadline-seconds=10" in container["args"]
    assert "--retry-period-seconds=2.5" in container["args"]
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert container["resources"] == FULL_VALUES["resources"]
    assert deploy["spec"]["template"]["metadata"]["labels"]["team"] == "ml"
    assert deploy["metadata"]["name"] == "dd-op"


def test_image_tag_defaults_to_app_version(chart, render):
    image = _container(render())["image"]
    assert image == f"ghcr.io/disagg-dev/disagg-operator:{chart.metadata['appVersion']}"


def test_service_monitor_shape(render):
    """ServiceMonitor is a custom kind (no upstream schema): check what Prometheus needs."""
    objs = render(FULL_VALUES)
    monitor, service = one(objs, "ServiceMonitor"), one(objs, "Service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "prom"
    spec = monitor["spec"]
    assert set(spec) == {"selector", "namespaceSelector", "endpoints"}
    # It must select the metrics Service, by labels that Service carries.
    assert spec["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert spec["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    [endpoint] = spec["endpoints"]
    assert endpoint == {
        "port": service["spec"]["ports"][0]["name"],
        "path": "/metrics",
        "interval": "15s",
        "scrapeTimeout": "5s",
    }
    assert "ServiceMonitor" not in kinds(render())


def test_service_monitor_without_service_fails_naming_both_keys(chart):
    values = {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}}
    with pytest.raises(Exception, match=r"metrics\.serviceMonitor\.enabled.*metrics\.service"):
        render_files(chart, values)


def test_existing_service_account_must_be_named(chart, render):
    with pytest.raises(Exception, match=r"serviceAccount\.name"):
        render_files(chart, {"serviceAccount": {"create": False}})
    objs = render({"serviceAccount": {"create": False, "name": "mine"}})
    assert "ServiceAccount" not in kinds(objs)
    assert one(objs, "ClusterRoleBinding")["subjects"][0]["name"] == "mine"


def test_rbac_create_false_renders_no_rbac(render):
    objs = render({"rbac": {"create": False}})
    assert not {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"} & set(kinds(objs))


def test_notes_say_what_to_apply_next(chart):
    notes = render_files(chart)["disagg/templates/NOTES.txt"]
    assert "kubectl apply -f examples/quickstart-cpu.yaml" in notes
    assert "kubectl get disagg" in notes
    namespaced = render_files(chart, {"watchNamespaces": ["team-a"]})["disagg/templates/NOTES.txt"]
    assert "kubectl apply -n team-a -f examples/quickstart-cpu.yaml" in namespaced
    assert "kubectl get disagg -n team-a" in namespaced


def test_notes_point_at_files_that_exist():
    from tests.chart.chartkit import CHART, ROOT

    notes = (CHART / "templates" / "NOTES.txt").read_text()
    for path in ("examples/quickstart-cpu.yaml", "docs/heterogeneous.md"):
        assert path in notes
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_operator_cli_accepts_the_rendered_arguments(render, name):
    """The chart's args parse with the real `disagg operator` parser (same flags, choices)."""
    from disagg_operator.controller import run
    from disagg_operator.controller.election import leader

    values = VALUE_SETS[name]
    args = run._parser().parse_args(_container(render(values))["args"])
    assert args.namespace == values.get("watchNamespaces", [])
    assert args.all_namespaces is not bool(values.get("watchNamespaces"))
    assert args.health_port == values.get("health", {}).get("port", 8080)
    assert args.metrics_port == values.get("metrics", {}).get("port", 9090)
    canary = values.get("transferCanary", {})
    default = "ghcr.io/disagg-dev/disagg-worker-cpu:" + values.get("image", {}).get("tag", "0.1.0")
    expected = canary.get("image") or default if canary.get("enabled", True) else None
    assert args.canary_image == expected
    election = leader.settings_from(args)
    assert election is not None and election.problems() == []
    assert election.namespace == NAMESPACE


HPU = {"name": "hpu", "bufferDevices": ["hpu", "cpu"], "acceleratorResource": "habana.ai/gaudi"}
PLATFORMS_FILE = "--platforms-file=/etc/disagg/platforms/platforms.yaml"


def test_platforms_render_a_mounted_configmap_and_the_flag(render):
    from disagg_contract import platform_file

    objs = render({"platforms": [HPU]})
    config = one(objs, "ConfigMap")
    assert config["metadata"]["name"] == "disagg-platforms"
    assert config["metadata"]["namespace"] == NAMESPACE
    (hpu,) = platform_file.parse(config["data"]["platforms.yaml"])
    assert hpu.name == "hpu" and hpu.accelerator_resource == "habana.ai/gaudi"
    pod = one(objs, "Deployment")["spec"]["template"]
    container = _container(objs)
    assert PLATFORMS_FILE in container["args"]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "platforms")
    assert mount == {"name": "platforms", "mountPath": "/etc/disagg/platforms", "readOnly": True}
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "platforms")
    assert volume["configMap"]["name"] == "disagg-platforms"
    # The operator reads the file once at start: another table must replace its pod.
    key = "disagg.dev/platforms-checksum"
    changed = one(render({"platforms": [{**HPU, "ucxTls": "rc,tcp,self"}]}), "Deployment")
    assert (
        changed["spec"]["template"]["metadata"]["annotations"][key]
        != (pod["metadata"]["annotations"][key])
    )


def test_no_platforms_no_configmap_volume_or_flag(render):
    objs = render()
    assert "ConfigMap" not in kinds(objs)
    pod = one(objs, "Deployment")["spec"]["template"]
    assert not any(a.startswith("--platforms-file") for a in _container(objs)["args"])
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["tmp", "root-key"]
    assert "annotations" not in pod["metadata"]


@pytest.mark.parametrize("name", sorted(VALUE_SETS))
def test_no_role_can_read_secrets(render, name):
    """Least privilege: the operator creates handshake Secrets but reads none, anywhere."""
    reads = {"get", "list", "watch", "*"}
    secret_verbs = set()
    for obj in render(VALUE_SETS[name]):
        if obj["kind"] not in {"Role", "ClusterRole"}:
            continue
        for rule in obj["rules"]:
            if {"secrets", "*"} & set(rule.get("resources", [])):
                assert not reads & set(rule["verbs"]), (obj["kind"], rule)
                secret_verbs |= set(rule["verbs"])
    assert secret_verbs == {"create"}


def test_chart_makes_a_random_root_key_and_mounts_it(render):
    import base64

    objs = render()
    secret = one(objs, "Secret")
    assert secret["metadata"]["name"] == "disagg-root-key"
    assert secret["metadata"]["namespace"] == NAMESPACE
    assert len(base64.b64decode(secret["data"]["root-key"])) == 64
    again = one(render(), "Secret")["data"]["root-key"]
    assert again != secret["data"]["root-key"]  # random (an install keeps its own: lookup)
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "root-key")
    assert volume["secret"]["secretName"] == "disagg-root-key"
    assert volume["secret"]["defaultMode"] == 0o440 and pod["securityContext"]["fsGroup"] == 65532
    mount = next(m for m in _container(objs)["volumeMounts"] if m["name"] == "root-key")
    assert mount["readOnly"] and mount["mountPath"] == "/etc/disagg/root-key"
    assert "--root-key-file=/etc/disagg/root-key/root-key" in _container(objs)["args"]


def test_an_existing_root_key_secret_is_mounted_not_made(render):
    objs = render({"rootKey": {"existingSecret": "mine", "existingSecretKey": "k"}})
    assert "Secret" not in kinds(objs)
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "root-key")
    assert volume["secret"]["secretName"] == "mine"
    assert volume["secret"]["items"] == [{"key": "k", "path": "k"}]
    assert "--root-key-file=/etc/disagg/root-key/k" in _container(objs)["args"]
