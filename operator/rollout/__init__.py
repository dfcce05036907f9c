"""Rollouts: the KV-compatibility key, revisions and the pure rollout planner.

Pure layer. :mod:`.kvkey` says which spec fields decide whether a decode can read a
prefill's KV (and hashes them into the KV revision); :mod:`.planner` decides, from the
observed pods, which pods to create and delete in this sync and which KV revision the
routing objects select. :mod:`disagg_operator.reconcile` runs what they decide.
"""
