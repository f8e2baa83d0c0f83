"""Typed environment configuration: YAML files in this folder, read and validated once."""

from config.loader import ConfigError, available_environments, load_environment, load_environments, load_platform
from config.schema import EgressMode, Environment
from config.sharing import ImageSharing, Platform

__all__ = [
    "ConfigError",
    "EgressMode",
    "Environment",
    "ImageSharing",
    "Platform",
    "available_environments",
    "load_environment",
    "load_environments",
    "load_platform",
]
