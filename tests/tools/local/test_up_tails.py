"""`disagg up --prompt`'s error: the failing worker's last log lines, and its log's path
only when the log outlives the run (--log-dir); the run's own folder is removed at exit."""

from __future__ import annotations

from pathlib import Path

from disagg_tools.local.children import Child
from disagg_tools.local.stack import Run
from disagg_tools.local.up import _tails

URL = "http://127.0.0.1:8201"


def _run(log: Path) -> Run:
    log.write_text("engine started\nKV transfer failed: NIXL_ERR_REMOTE_DISCONNECT\n")
    child = Child("demo-d-0-engine", ["true"], {}, log)
    return Run(
        [child], {"decode": [URL]}, logs={"demo-d-0": log}, names={URL: "demo-d-0"},
        engines={"demo-d-0": child},
    )  # fmt: skip


def test_a_log_removed_at_exit_is_quoted_not_pointed_to(tmp_path: Path) -> None:
    run = _run(tmp_path / "demo-d-0.log")
    tails = _tails(run, f"decode {URL}/v1/completions answered 500: boom", kept=False)
    assert "NIXL_ERR_REMOTE_DISCONNECT" in tails
    assert str(tmp_path) not in tails and "--log-dir DIR keeps it" in tails


def test_a_kept_log_is_named(tmp_path: Path) -> None:
    run = _run(tmp_path / "demo-d-0.log")
    tails = _tails(run, f"decode {URL}/v1/completions answered 500: boom", kept=True)
    assert f"({tmp_path / 'demo-d-0.log'})" in tails and "NIXL_ERR_REMOTE_DISCONNECT" in tails


def test_a_client_error_names_no_worker_and_gets_no_tails(tmp_path: Path) -> None:
    """The router relays an engine's client error flat (its own message and field), so
    no worker's log is shown for a request the client must fix."""
    run = _run(tmp_path / "demo-d-0.log")
    assert _tails(run, "max_tokens: must be an integer of at least 1, got 0", kept=True) == ""
