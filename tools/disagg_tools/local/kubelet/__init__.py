"""The local kubelet: the pods an API server holds (the emulator's) run as processes here,
probed and reported as a kubelet does, with the endpoints, cluster DNS and Deployment
controllers around them. :mod:`.run` starts all of it beside a running operator."""
