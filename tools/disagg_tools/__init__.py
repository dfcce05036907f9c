"""disagg's tools, apart from the product: the embedded cluster's parts (the Kubernetes API
server stand-in, :mod:`.emulator`; the local kubelet and the local runtimes, :mod:`.local`),
the benchmarks (:mod:`.bench`) and what real vLLM needs on this machine (:mod:`.vllm`).
No image installs them; the product never imports them (an import contract says so).
"""
