"""kube-apiserver's rules for custom resources, ported from kubernetes/apiextensions-apiserver
at a named tag: what it refuses of a CustomResourceDefinition, and what it does to a custom
resource on every write (pruning, defaulting, schema and CEL validation).

Pure layer: the emulator (:mod:`disagg_operator.emulator.server`) applies these rules; each
module names the upstream files it ports and the tag.
"""
