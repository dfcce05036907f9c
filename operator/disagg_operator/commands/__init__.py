"""The offline commands over render: `disagg render` (:mod:`.render`: every object a
manifest renders to) and `disagg crd` (:mod:`.crd`: the generated CRD). I/O (files, stdout).
"""
