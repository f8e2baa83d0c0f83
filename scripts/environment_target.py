"""Print ``aws://<account>/<region>`` of one environment of config/, as ``cdk bootstrap`` takes it.

Usage: python scripts/environment_target.py ENV [--config-dir DIR]. A config mistake is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config.loader import CONFIG_DIR, ConfigError, load_environment


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env", help="an environment: the name of a config/<env>.yaml")
    parser.add_argument("--config-dir", type=Path, default=CONFIG_DIR, help="folder of the <env>.yaml files")
    args = parser.parse_args(argv)
    try:
        env = load_environment(args.env, args.config_dir)
    except ConfigError as err:
        print(err, file=sys.stderr)
        return 2
    print(f"aws://{env.account}/{env.region}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
