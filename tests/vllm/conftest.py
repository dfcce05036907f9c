"""Fixtures of the vLLM contract suite: vLLM's own CLI parser, and real vLLM engines.

Every test here is marked ``vllm`` and needs the ``vllm`` extra (``make test-vllm``
installs it). vLLM is imported lazily, so collecting this folder in the default run
(where the marker deselects it) never imports vLLM.

The engines are started once per session and shared: each vLLM engine takes ~30 s to
start and ~3 GB of memory on this kind of host. Order: the aggregated engine runs alone
first (the reference tokens), is stopped, then the rendered P/D pair starts behind the
proxy.
"""

from __future__ import annotations

import importlib
import json
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_tools.local import serving as local_serving
from disagg_tools.local.stack import Run, launch, start_aggregated, stop_run
from disagg_tools.vllm.rules import judge, metrics

ROOT = Path(__file__).resolve().parents[2]
VLLM_CPU = ROOT / "examples" / "vllm-cpu.yaml"
# Where vLLM keeps `vllm serve`'s parser, newest first (it moved in 0.29 and 0.33).
PARSER_MODULES = (
    "vllm.entrypoints.common.cli_args",
    "vllm.entrypoints.launchers.cli_args",
    "vllm.entrypoints.openai.cli_args",
)
PROMPT_LENGTHS = (16, 40, 64, 100, 150, 230, 320, 400)
MAX_TOKENS = 16


class ServeParser:
    """vLLM's own `vllm serve` parsing: argv → (namespace, AsyncEngineArgs). The parser
    is built once (vLLM's takes ~0.25 s) and reused for every argv."""

    def __init__(self) -> None:
        from vllm.utils.argparse_utils import FlexibleArgumentParser

        self.module = next(m for m in map(_try_import, PARSER_MODULES) if m is not None)
        self.parser = self.module.make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))

    def parse(self, argv: list[str]) -> tuple[Any, Any]:
        from vllm.engine.arg_utils import AsyncEngineArgs

        if argv[:2] == ["vllm", "serve"]:
            argv = argv[2:]
        args = self.parser.parse_args(argv)
        if getattr(args, "model_tag", None) is not None:  # what `vllm serve MODEL` does
            args.model = args.model_tag
        self.module.validate_parsed_serve_args(args)
        return args, AsyncEngineArgs.from_cli_args(args)


def _try_import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@pytest.fixture(scope="session")
def serve_parser() -> ServeParser:
    return ServeParser()


def prompts() -> list[list[int]]:
    """Token-id prompts of 16 to 400 tokens (BOS first; ids clear of the special tokens)."""
    return [[0] + [4 + (i * 37 + n * 11) % 1020 for i in range(n - 1)] for n in PROMPT_LENGTHS]


def post(url: str, body: dict[str, Any], timeout: float = 300) -> dict[str, Any]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        out: dict[str, Any] = json.load(resp)
    return out


def greedy(url: str, prompt: list[int]) -> list[int]:
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "return_token_ids": True}
    ids: list[int] = post(url + "/v1/completions", body)["choices"][0]["token_ids"]
    return ids


Logprobs = judge.Tops


def greedy_logprobs(url: str, prompt: list[int]) -> tuple[list[int], Logprobs]:
    """Greedy tokens and, per position, the judge's top logprobs keyed by token id."""
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
    body |= {"return_token_ids": True, **judge.request_fields()}
    choice = post(url + "/v1/completions", body)["choices"][0]
    return choice["token_ids"], judge.tops_of(choice)


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from disagg_tools.vllm import checkpoint

    out = tmp_path_factory.mktemp("models") / "tiny-llama"
    checkpoint.write(out)
    return out


def _manifest(model: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(VLLM_CPU.read_text())
    body["metadata"].update(namespace="default", uid="local")
    body["spec"]["model"] = str(model)
    return body


@pytest.fixture(scope="session")
def aggregated(
    tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory
) -> list[tuple[list[int], Logprobs]]:
    """Greedy tokens and top logprobs of an aggregated vLLM (the rendered decode pod
    without its KV connector) for every prompt, then for each prompt with its second token
    changed (the judge's negative control), run alone, then stopped."""
    logs = tmp_path_factory.mktemp("aggregated")
    run = Run([], {})
    try:
        url = start_aggregated(VLLM_CPU, logs, run, model=str(tiny_llama))
        return [greedy_logprobs(url, p) for p in [*prompts(), *map(altered, prompts())]]
    finally:
        stop_run(run)


def altered(prompt: list[int]) -> list[int]:
    """``prompt`` with its second token changed: wrong KV for one early position."""
    return [prompt[0], 4 + (prompt[1] + 500) % 1020, *prompt[2:]]


@pytest.fixture(scope="session")
def aggregated_tokens(aggregated: list[tuple[list[int], Logprobs]]) -> list[list[int]]:
    return [tokens for tokens, _ in aggregated[: len(prompts())]]


@dataclass
class Stack:
    run: Run

    @property
    def proxy(self) -> str:
        return self.run.proxy_url

    def url(self, role: str) -> str:
        return self.run.workers[role][0]

    def log(self, role: str) -> Path:
        return self.run.logs[self.run.names[self.url(role)]]


def launched(body: dict[str, Any], tmp: Path) -> Iterator[Stack]:
    """The manifest ``body`` as `disagg up` runs it (rendered pods, proxy in front), until
    the generator is closed."""
    path = tmp / "manifest.yaml"
    path.write_text(yaml.safe_dump(body))
    run = Run([], {})
    try:
        launch(path, tmp, tmp, run, port=0, say=print)
        yield Stack(run)
    finally:
        stop_run(run)


def assert_pd_equals_aggregated(
    stack: Stack, chosen: list[list[int]], want: list[list[int]], wait_s: float
) -> None:
    """Greedy tokens of ``chosen`` through the stack's proxy equal ``want``, and the KV
    really moved: decode's own metrics count one NIXL transfer per prompt, none failed (a
    decode that silently recomputed would give the same tokens)."""
    since = local_serving.log_size(stack.log("decode"))
    got = [greedy(stack.proxy, p) for p in chosen]
    for n, (mine, theirs) in enumerate(zip(got, want, strict=True)):
        assert mine == theirs, f"prompt {n} ({len(chosen[n])} tokens) differs"
    figures = local_serving.transfer_figures(
        stack.log("decode"), since, wait_s=wait_s, expect=len(got)
    )
    assert figures[metrics.COUNT] >= len(got)
    assert figures[metrics.FAILED] == 0


@pytest.fixture(scope="module")
def pd_stack(
    aggregated_tokens: list[list[int]], tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """examples/vllm-cpu.yaml as `disagg up` runs it: rendered pods, proxy in front; with
    ``prefixIndex: events`` (every engine publishes its KV events, the router reads decode's;
    the blocks and the numbers are those of the example's own settings). Module-scoped:
    stopped before any other module starts engines of its own."""
    body = _manifest(tiny_llama)
    body["spec"]["routing"] = {"prefixIndex": "events"}
    yield from launched(body, tmp_path_factory.mktemp("pd"))
