"""The bounds on what a client sends: how deep JSON nests."""

from __future__ import annotations

import json

from disagg_worker.serve.limits import nested_deeper


def test_nested_deeper_measures_lists_and_objects() -> None:
    assert not nested_deeper("x", 0) and not nested_deeper({}, 1)
    assert nested_deeper({}, 0) and nested_deeper([[]], 1) and not nested_deeper([[]], 2)
    body = {"messages": [{"role": "user", "content": "x"}], "prompt": [1, 2]}
    assert not nested_deeper(body, 3) and nested_deeper(body, 2)
    deep = json.loads("[" * 500 + "]" * 500)
    assert nested_deeper(deep, 64) and not nested_deeper(deep, 500)
