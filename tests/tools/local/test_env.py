"""A container's env, command and args as the local runtimes make them, against the
kubelet's: Kubernetes' own expansion cases (third_party/forked/golang/expansion,
expand_test.go) and makeEnvironmentVariables' order and optional references
(pkg/kubelet/kubelet_pods.go, 1.36)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from disagg_tools.local.rules.env import (
    EnvError,
    PodFields,
    container_command,
    container_env,
    data_of,
    expand,
    references,
)

# doExpansionTest's cases: (name, input, expected)
UPSTREAM_CASES = [
    ("whole string", "$(VAR_A)", "A"),
    ("repeat", "$(VAR_A)-$(VAR_A)", "A-A"),
    ("beginning", "$(VAR_A)-1", "A-1"),
    ("middle", "___$(VAR_B)___", "___B___"),
    ("end", "___$(VAR_C)", "___C"),
    ("compound", "$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"),
    ("escape & expand", "$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"),
    ("compound escape", "$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"),
    ("mixed in escapes", "f000-$$VAR_A", "f000-$VAR_A"),
    ("backslash escape ignored", "foo\\$(VAR_C)bar", "foo\\Cbar"),
    ("backslash escape ignored", "foo\\\\$(VAR_C)bar", "foo\\\\Cbar"),
    ("lots of backslashes", "foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"),
    ("nested var references", "$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"),
    ("nested var references second type", "$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"),
    ("value is a reference", "$(VAR_REF)", "$(VAR_A)"),
    ("value is a reference x 2", "%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"),
    ("empty var", "foo$(VAR_EMPTY)bar", "foobar"),
    ("unterminated expression", "foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"),
    ("expression without operator", "f00__(VAR_A)__", "f00__(VAR_A)__"),
    ("shell special vars pass through", "$?_boo_$!", "$?_boo_$!"),
    ("bare operators are ignored", "$VAR_A", "$VAR_A"),
    ("undefined vars are passed through", "$(VAR_DNE)", "$(VAR_DNE)"),
    ("multiple (even) operators, var undefined", "$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"),
    ("multiple (even) operators, var defined", "$$$$$$(VAR_A)", "$$$(VAR_A)"),
    ("multiple (odd) operators, var undefined", "$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"),
    ("multiple (odd) operators, var defined", "$$$$$$$(VAR_A)", "$$$A"),
    ("missing open expression", "$VAR_A)", "$VAR_A)"),
    ("shell syntax ignored", "${VAR_A}", "${VAR_A}"),
    ("trailing incomplete expression not consumed", "$(VAR_B)_______$(A", "B_______$(A"),
    (
        "trailing incomplete expression, no content, is not consumed",
        "$(VAR_C)_______$(",
        "C_______$(",
    ),
    ("operator at end of input string is preserved", "$(VAR_A)foobarzab$", "Afoobarzab$"),
    ("shell escaped incomplete expr", "foo-\\$(VAR_A", "foo-\\$(VAR_A"),
    ("lots of $( in middle", "--$($($($($--", "--$($($($($--"),
    ("lots of $( in beginning", "$($($($($--foo$(", "$($($($($--foo$("),
    ("lots of $( at end", "foo0--$($($($(", "foo0--$($($($("),
    ("escaped operators in variable names are not escaped", "$(foo$$var)", "$(foo$$var)"),
    ("newline not expanded", "\n", "\n"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "text", "expected"), UPSTREAM_CASES, ids=lambda v: str(v))
@pytest.mark.parametrize("dual", [False, True], ids=["TestMapping", "TestMappingDual"])
def test_expansion_is_kubernetes_expand(name: str, text: str, expected: str, dual: bool) -> None:
    one = {"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
    known = (
        ({"VAR_A": "A", "VAR_EMPTY": ""}, {"VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)"})
        if dual
        else (one,)
    )
    assert expand(text, *known) == expected, name


def _pod(container: dict[str, Any]) -> PodFields:
    pod = {"metadata": {"name": "p", "namespace": "n"}, "spec": {"containers": [container]}}
    return PodFields(pod, "10.0.0.7", "10.0.0.1", "node-a")


def _secret(name: str, **data: str) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"kind": "Secret", "metadata": {"name": name}, "data": encoded}


MISSING_KEY = {"name": "s", "key": "x"}  # the Secret is there, the key is not
NO_MAP = {"name": "absent", "key": "k"}  # no such ConfigMap
OBJECTS = [
    {"kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"A": "from-cm", "B": "b"}},
    _secret("s", TOKEN="t0k", A="from-secret"),
]


def test_map_reference_expands_from_the_variables_before() -> None:
    """TestMapReference: each value expands against the ones declared before it."""
    container = {
        "name": "c",
        "env": [
            {"name": "FOO", "value": "bar"},
            {"name": "ZOO", "value": "$(FOO)-1"},
            {"name": "BLU", "value": "$(ZOO)-2"},
        ],
    }
    env = container_env("c", container, _pod(container), data_of(OBJECTS))
    assert env == {"FOO": "bar", "ZOO": "bar-1", "BLU": "bar-1-2"}


def test_env_from_comes_first_and_env_overrides_it() -> None:
    container = {
        "name": "c",
        "envFrom": [
            {"configMapRef": {"name": "cm"}},
            {"secretRef": {"name": "s"}, "prefix": "S_"},
            {"configMapRef": {"name": "absent", "optional": True}},
        ],
        "env": [
            {"name": "B", "value": "mine:$(A):$(S_TOKEN):$(LATER)"},
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "GONE", "valueFrom": {"secretKeyRef": {**MISSING_KEY, "optional": True}}},
            {"name": "NONE", "valueFrom": {"configMapKeyRef": {**NO_MAP, "optional": True}}},
            {"name": "LATER", "value": "l"},
            {"name": "RAW", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "A"}}},
            {"name": "EMPTY", "value": ""},
        ],
        "command": ["run", "$(IP)"],
        "args": ["--b=$(B)", "$$(IP)", "$(GONE)"],
    }  # fmt: skip
    env = container_env("c", container, _pod(container), data_of(OBJECTS))
    assert env == {
        "A": "from-cm", "B": "mine:from-cm:t0k:$(LATER)", "S_TOKEN": "t0k", "S_A": "from-secret",
        "IP": "10.0.0.7", "LATER": "l", "RAW": "from-cm", "EMPTY": "",
    }  # fmt: skip
    assert container_command(container, env) == [
        "run", "10.0.0.7", "--b=mine:from-cm:t0k:$(LATER)", "$(IP)", "$(GONE)",
    ]  # fmt: skip
    assert references(container) == {("ConfigMap", "cm"), ("Secret", "s"), ("ConfigMap", "absent")}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"valueFrom": {"secretKeyRef": MISSING_KEY}}, "Secret 's' has no key 'x'"),
        ({"valueFrom": {"configMapKeyRef": NO_MAP}}, "ConfigMap 'absent' does not exist"),
        ({"valueFrom": {"fieldRef": {"fieldPath": "status.phase"}}}, "fieldRef 'status.phase'"),
        (
            {"valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            "resourceFieldRef limits.cpu is not set",
        ),
    ],
)
def test_what_a_kubelet_would_fail_on_is_named(item: dict[str, Any], message: str) -> None:
    container = {"name": "c", "env": [{"name": "X", **item}]}
    with pytest.raises(EnvError, match=f"pod p container c env X: {message}"):
        container_env("pod p container c", container, _pod(container), data_of(OBJECTS))


MEMORY = {"resource": "limits.memory"}


def test_field_and_resource_refs() -> None:
    container = {
        "name": "c",
        "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}},
        "env": [
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {**MEMORY, "divisor": "1Mi"}}},
        ],
    }  # fmt: skip
    env = container_env("c", container, _pod(container), data_of(OBJECTS))
    assert env == {"NODE": "node-a", "NS": "n", "CPU": "2", "MEM": "1024"}
