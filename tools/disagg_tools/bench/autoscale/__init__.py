"""``disagg bench autoscale``: SLO-driven P:D scaling replayed on a fleet model.

:mod:`.traces` (arrival rates and request lengths), :mod:`.fleet` (the fluid P/D fleet a
policy sizes), :mod:`.policies` (static, HPA on queue length, saturation, the planner),
:mod:`.run` (the command: every trace and policy at each fleet size, JSON and a table).
"""
