"""Alerting and monitoring: the alerts topic, alarms of fleets, the file system and security events, Spot
notices, and the environment's dashboard."""
