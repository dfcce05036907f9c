"""Render subsystem (pure): a DisaggregatedDeployment → every child object it should own.

``objects`` (the whole set: Secret, Services, NetworkPolicy, Pods, InferencePool),
``pods`` (one pod and its engine container), ``derive`` (every derived KV-transfer value
and its reason), ``cli`` (``disagg render -f FILE``, the only I/O here).
"""
