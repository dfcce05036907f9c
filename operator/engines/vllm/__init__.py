"""The vLLM engine (``vllm serve`` with NixlConnector): what each role's pods run
(:mod:`.engine`), the values derived for that vLLM version (:mod:`.derive`) and what it
cannot run (:mod:`.checks`). What each vLLM release accepts is the contract table
:mod:`disagg_operator.contracts.vllm`."""
