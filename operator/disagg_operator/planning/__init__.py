"""Planning: what this sync writes, and which pods a rollout creates and deletes.

:mod:`.actions` compares desired and observed children
(every kind but Pods) into creates, patches and deletes; :mod:`.rollout` decides, from the
observed pods, which pods to create and delete and which KV revision the routing objects
select; :mod:`.decide` is the glue from an observation to that plan.
:mod:`disagg_operator.controller.sync` runs what they decide.

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
