"""Engine contracts: what each external serving engine accepts, per version (pure tables)."""
