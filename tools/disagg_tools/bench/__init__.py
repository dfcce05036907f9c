"""The benchmarks and the ``disagg bench`` dispatcher (:mod:`.cli`): scripts that print
figures (JSON and a table), never tests. The worker's (transfer, e2e, routing), the
operator's (reconciles against the emulator, rollouts, failover), the data path under
faults, the pods against processes, and SLO-driven scaling (:mod:`.autoscale`).
"""
