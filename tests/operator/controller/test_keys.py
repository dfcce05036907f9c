"""Handshake keys: derived from the root key, and the Secret written only with new pods."""

from __future__ import annotations

import hashlib
import hmac

from disagg_operator.controller.rules.keys import derive, root_problem, without_secrets, writes
from disagg_operator.planning.actions import Action, plan
from disagg_operator.render.objects import render
from tests.operator.builders import body

ROOT = b"r" * 32


def test_key_is_hmac_sha256_of_namespace_name_uid() -> None:
    expected = hmac.new(ROOT, b"ns/demo/uid-1", hashlib.sha256).hexdigest()
    assert derive(ROOT, "ns", "demo", "uid-1") == expected
    assert len(expected) == 64
    others = {
        derive(b"s" * 32, "ns", "demo", "uid-1"),  # another root key
        derive(ROOT, "ns", "demo", "uid-2"),  # the same name, created again
        derive(ROOT, "ns2", "demo", "uid-1"),
    }
    assert expected not in others and len(others) == 3


def test_short_root_keys_are_refused_with_the_fix() -> None:
    assert root_problem(ROOT) is None
    problem = root_problem(b"short")
    assert problem is not None and "5 bytes" in problem and "at least 32" in problem


def test_the_secret_is_created_with_the_pods_only() -> None:
    desired = render(body(), hmac_key="k")
    children = [o for o in without_secrets(desired) if o["kind"] != "Pod"]
    pods = [Action("create", "Pod", o["metadata"]["name"]) for o in desired if o["kind"] == "Pod"]
    first = writes(desired, plan(children, []) + pods)
    assert [str(a) for a in first][:2] == [
        "create Secret/demo-handshake",
        "create Service/demo-prefill",
    ]
    assert first[0].body is not None and first[0].body["data"]["hmac"]
    observed = [o for o in children if o["kind"] != "Secret"]
    assert writes(desired, plan(children, observed)) == []  # steady: nothing
    patch_only = [Action("patch", "Service", "demo-prefill")]
    assert writes(desired, patch_only) == patch_only
    recreate = [Action("create", "Pod", "demo-decode-0")]
    assert [str(a) for a in writes(desired, recreate)] == [
        "create Secret/demo-handshake",
        "create Pod/demo-decode-0",
    ]
    deletes = [Action("delete", "Pod", "demo-decode-1")]
    assert writes(desired, deletes) == deletes


def test_operator_refuses_an_unusable_root_key_file(tmp_path, capsys) -> None:
    from disagg_operator.controller import run

    short = tmp_path / "short"
    short.write_text("abc\n")
    assert run.main(["--root-key-file", str(short)]) == 2
    assert "--root-key-file" in capsys.readouterr().err
    assert run.main(["--root-key-file", str(tmp_path / "missing")]) == 2
    assert "cannot read" in capsys.readouterr().err
    good = tmp_path / "good"
    good.write_text("x" * 64 + "\n")
    assert run.read_root_key(str(good)) == b"x" * 64
    assert run.read_root_key(None) is None
