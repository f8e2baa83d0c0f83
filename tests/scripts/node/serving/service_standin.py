"""A stand-in for a fleet's service: the real example server (examples/serve.py) serving a tiny model
without torch, whose load the test chooses.

``python3 service_standin.py --mode ready|slow|never|crash [serve.py's flags]``: ``ready`` loads at once,
``slow`` after ``--load-seconds`` (1), ``never`` never finishes loading (the health check answers 503 until
the process is stopped), ``crash`` fails to load (the server exits 1). ``--examples DIR``: serve.py from
there (e.g. where the user data unpacked it) instead of the repository's.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"
if str(EXAMPLES) not in sys.path:
    sys.path.insert(0, str(EXAMPLES))


class TinyModel:
    """Two numbers in, their sum and their product out; loading as the mode says."""

    name = "tiny-sum-product"

    def __init__(self, mode: str = "ready", load_seconds: float = 1.0) -> None:
        self.mode = mode
        self.load_seconds = load_seconds
        self.gate = threading.Event()
        self.loaded = False
        self.calls: list[list[list[float]]] = []

    def load(self) -> None:
        if self.mode == "crash":
            raise RuntimeError("CUDA error: out of memory (stand-in)")
        if self.mode == "slow":
            time.sleep(self.load_seconds)
        if self.mode in ("never", "gated"):
            self.gate.wait()
        self.loaded = True

    def example_input(self) -> list[list[float]]:
        return [[1.0, 1.0]]

    def predict(self, inputs: list[list[float]]) -> list[list[float]]:
        if not self.loaded:
            raise RuntimeError("predict before load")
        if any(len(row) != 2 for row in inputs):
            raise ValueError("each row of inputs must have 2 numbers")
        self.calls.append(inputs)
        return [[row[0] + row[1], row[0] * row[1]] for row in inputs]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=("ready", "slow", "never", "crash"), default="ready")
    parser.add_argument("--load-seconds", type=float, default=1.0)
    parser.add_argument("--examples", help="the folder to import serve.py from")
    args, rest = parser.parse_known_args(argv)
    if args.examples:
        sys.path.insert(0, args.examples)
    import serve

    print(f"stand-in: serving with {serve.__file__}", flush=True)
    return serve.run(TinyModel(args.mode, args.load_seconds), rest)


if __name__ == "__main__":
    sys.exit(main())
