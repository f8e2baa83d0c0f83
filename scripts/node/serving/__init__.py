"""The fleet's service on an inference node: its settings (service.json), the systemd drop-in that runs it,
the launcher the unit starts, and the wait for its health check that gates the launch lifecycle hook."""
