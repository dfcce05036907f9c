"""Status (pure): what the custom resource reports: its conditions and counts
(:mod:`.conditions`) and the transfer canaries' verdict (:mod:`.transfer_path`)."""
