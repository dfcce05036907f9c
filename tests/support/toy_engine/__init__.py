"""A toy engine whose P/D protocol is not vLLM's ``kv_transfer_params``: its operator
plugin (:mod:`.engine`), its P/D protocol (:mod:`.pd`), its server (:mod:`.server`) and
how local runs start it (:mod:`.local`), all in this folder, as a new engine would bring
them. tests/operator/engines/test_seam_pd.py runs it through render, the router and the
canary."""
