"""The vLLM engine (``vllm serve`` with NixlConnector): what each role's pods run
(:mod:`.engine`), the values derived for that vLLM version (:mod:`.derive`), what it
cannot run (:mod:`.checks`), its own spec fields (:mod:`.fields`), what each vLLM release
accepts (the contract table :mod:`.contract`) and the engine-idle shim its CPU pods load
(:mod:`.engine_idle`)."""
