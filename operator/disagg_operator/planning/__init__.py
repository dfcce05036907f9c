"""Planning: what a sync decides and what it reports.

:mod:`.decide` turns one observation of a deployment into this sync's plan: the desired
children (rendered once), the writes (:mod:`.actions` for every kind but instances), and
which pods a rollout creates and deletes (:mod:`.rollout`, :mod:`.kvroll`, over the pod
views of :mod:`.pods`). :mod:`.status` turns the same observation and plan into the
custom resource's status (conditions from the one table of :mod:`.reasons`, the transfer
canaries' verdict folded by :mod:`.transfer_path`); :mod:`.autoscale` is the SLO planner
the autoscaler asks. :mod:`disagg_operator.controller.sync` reads, runs the writes, then
writes the status.

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
