"""Validation (pure): a DisaggregatedDeployment body → the model and every problem, each
naming its field and the fix (:mod:`.spec`)."""
