"""Typed environment configuration: YAML files in this folder, read and validated once."""

from config.loader import ConfigError, available_environments, load_environment, load_environments
from config.schema import EgressMode, Environment

__all__ = [
    "ConfigError",
    "EgressMode",
    "Environment",
    "available_environments",
    "load_environment",
    "load_environments",
]
