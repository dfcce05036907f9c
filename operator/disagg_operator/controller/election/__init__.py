"""Leader election on a coordination Lease, so several operator replicas run one reconciler.

``lease`` (pure): the rules, client-go's: who may take the Lease, what to write, when it is
lost. ``leader`` (I/O): the elector that stands by, acquires, renews and releases it
through :mod:`disagg_operator.controller.client`, and gates kopf in
:mod:`disagg_operator.controller.run`.
"""
