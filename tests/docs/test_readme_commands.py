"""The README's commands run as shown: `disagg worker probe` against a live prefill, and
`disagg up`'s sample output matches a real run line for line (figures, ports and pids
aside; ``...`` stands for lines the sample leaves out)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from disagg_contract.config import WorkerConfig
from disagg_worker.transfer.peer_process import PrefillProcess, spawn_prefill
from disagg_worker.transfer.rules.layout import KVLayout

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
LOCAL_RUN = (ROOT / "docs" / "local-run.md").read_text()
DISAGG = [sys.executable, "-m", "disagg_operator.cli"]


def _shown(prefix: str) -> list[str]:
    """The README's command line starting with ``prefix``, comment dropped."""
    found = [line for line in README.splitlines() if line.startswith(prefix)]
    assert len(found) == 1, f"README: one `{prefix}` line expected, found {len(found)}"
    return shlex.split(found[0], comments=True)


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("handshake") / "hmac"
    path.write_bytes(b"a key the deployment's Secret would hold\n")
    return path


@pytest.fixture(scope="module")
def prefill(secret: Path) -> Iterator[PrefillProcess]:
    layout = KVLayout(num_layers=2, num_kv_heads=2, head_dim=16, block_size=4, num_blocks=8)
    cfg = WorkerConfig(
        role="prefill", engine_id="prefill-0", side_channel_port=0, hmac_secret_path=str(secret)
    )
    proc = spawn_prefill(cfg, layout)
    yield proc
    proc.stop()


def test_the_readmes_probe_runs(prefill: PrefillProcess, secret: Path) -> None:
    """Outside a pod (no DISAGG_* env), the shown flags are all it needs."""
    argv = _shown("disagg worker probe")
    values = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert set(values) == {"--peer", "--engine-id", "--secret-file"}
    values.update({"--peer": f"127.0.0.1:{prefill.port}", "--secret-file": str(secret)})
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}
    done = subprocess.run(
        [*DISAGG, *argv[1:3], *(x for kv in values.items() for x in kv)],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"ok: 127.0.0.1:{prefill.port} (prefill-0) handshake")


def test_without_a_secret_the_probe_says_which_flag(prefill: PrefillProcess) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISAGG_")}
    args = ["worker", "probe", "--peer", f"127.0.0.1:{prefill.port}", "--deadline-s", "5"]
    done = subprocess.run([*DISAGG, *args], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1
    assert "no handshake secret is configured; pass --secret-file PATH" in done.stdout


# what differs between runs: timings, rates, ports, pids, ages and temp folders, the pod
# network a kubelet took and the pod addresses a run took; every other number (pods,
# processes, bytes, descriptors) is the run's and must be as shown
FIGURE = (
    r"\d+(?:\.\d+)?(?= ms| MB/s| s$)|(?<=pid )\d+|(?<=127\.0\.0\.1:)\d+|\d+(?=s$)"
    r"|(?<=/tmp/)tmp\w+|(?<=at 127\.0\.)\d+(?=\.0/24)|(?<=127\.0\.)\d+\.\d+(?=:)"
)


def _pattern(line: str) -> str:
    """A sample line as a pattern: each figure stands for any value of its kind."""
    parts = re.split(FIGURE, line)
    return r"[\w.]+".join(re.escape(p) for p in parts)


def _matches(sample: list[str], real: list[str]) -> bool:
    """Whether ``real`` is ``sample`` line for line, ``...`` matching any run of lines."""
    if not sample:
        return not real
    if sample[0] == "...":
        return any(_matches(sample[1:], real[i:]) for i in range(len(real) + 1))
    return (
        bool(real)
        and re.fullmatch(_pattern(sample[0]), real[0]) is not None
        and _matches(sample[1:], real[1:])
    )


def test_the_sample_matcher_tells_figures_from_counts() -> None:
    shown = ["transfer:   NIXL READ 65536 bytes in 1 descriptor(s): 0.526 ms (125 MB/s)", "..."]
    run = "transfer:   NIXL READ 65536 bytes in {} descriptor(s): 0.104 ms (628 MB/s)"
    assert _matches(shown, [run.format(1), "stopped 3 processes"])
    assert not _matches(shown, [run.format(2)])


def _sample_after(marker: str, doc: str = README) -> tuple[list[str], list[str]]:
    """The command a ``<!-- output: CMD -->`` marker names and the fenced block after it."""
    found = re.search(rf"<!-- output: ({re.escape(marker)}[^>]*) -->\n```\n(.*?)```", doc, re.S)
    assert found, f"no `<!-- output: {marker} ... -->` before a fenced block"
    return shlex.split(found.group(1)), found.group(2).splitlines()


def _run_matches(command: list[str], sample: list[str], *extra: str) -> None:
    done = subprocess.run(
        [*DISAGG, *command[1:], "--port", "0", *extra], cwd=ROOT, capture_output=True,
        text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    # a progress note comes every 15 s of a wait: how many depends on the machine
    real = [line for line in done.stdout.splitlines() if line.strip() and not _progress(line)]
    shown = [line for line in sample if line.strip()]
    assert _matches(shown, real), "the sample differs from a run:\n" + done.stdout


def _progress(line: str) -> bool:
    return line.startswith("  ...     ")


def test_the_readmes_cluster_sample_is_what_a_run_prints() -> None:
    """The first command's sample: `make up` runs this (the Makefile's up target)."""
    command, sample = _sample_after("disagg cluster")
    makefile = (ROOT / "Makefile").read_text()
    recipe = shlex.split(next(line for line in makefile.splitlines() if "/disagg cluster " in line))
    assert recipe[1:4] == command[1:4] and recipe[-2:] == ["--prompt", "$(PROMPT)"]
    assert f"PROMPT ?= {command[-1]}\n" in makefile
    _run_matches(command, sample, "--once")


def test_the_local_run_sample_is_what_a_run_prints() -> None:
    command, sample = _sample_after("disagg up", LOCAL_RUN)
    _run_matches(command, sample)
