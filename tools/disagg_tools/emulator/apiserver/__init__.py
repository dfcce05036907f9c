"""kube-apiserver's rules for custom resources, ported from kubernetes/apiextensions-apiserver
v0.36.3 and the apimachinery, apiserver, kube-openapi and cel-go versions it pins.

Pure layer: the emulator (:mod:`disagg_tools.emulator.server`) applies these rules.

- CRD admission (entry :mod:`.crd`): crd, crd_spec, crd_conversion, crd_subresources, names,
  schema_rules, schema_extensions, structural, structural_rules, defaults, fieldpath,
  cel_rules.
- Custom-resource writes (entry :mod:`.writes`): writes, decoding, defaulting, strategy,
  listtype.
- Shared. Field errors: fielderrors. Go formatting: gofmt. Regexps: goregex. Schema values:
  openapi, openapi_validate, openapi_numbers, openapi_result, formats, schema_validation,
  ratcheting, pruning. CEL: cel, celvalues (rules run on values); cel_compile, cel_parse,
  cel_check, cel_types, cel_decls, cel_cost, cel_estimates (rules typed and costed).
"""
