"""`disagg up --runtime podman`: the rendered pods as pods of containers (podman), each with
its own network and PID namespace on a network the run creates. :mod:`.plan` turns
rendered objects into what podman is asked for (pure); :mod:`.runtime` asks it (I/O)."""
