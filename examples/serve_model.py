"""The model of the example service (serve.py): a small multilayer perceptron built at start from a fixed
seed on the GPU, nothing downloaded. The one part of the example that imports torch."""

from __future__ import annotations

from typing import Any


class TorchMlp:
    """``input_width`` -> 256 -> 8, ReLU, evaluation mode; ``predict`` runs one forward pass on ``device``."""

    def __init__(self, *, device: str = "cuda", input_width: int = 64, hidden: int = 256, outputs: int = 8) -> None:
        self.device = device
        self.input_width = input_width
        self.hidden = hidden
        self.outputs = outputs
        self.name = f"mlp-{input_width}x{hidden}x{outputs}"
        self._net: Any = None

    def load(self) -> None:
        import torch  # here, not at the top: the HTTP side runs without torch

        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device; fix: run on a GPU node or pass --device cpu")
        torch.manual_seed(0)
        net = torch.nn.Sequential(
            torch.nn.Linear(self.input_width, self.hidden),
            torch.nn.ReLU(),
            torch.nn.Linear(self.hidden, self.outputs),
        )
        self._net = net.to(self.device).eval()
        self.name = f"{self.name} on {torch.device(self.device)}"

    def example_input(self) -> list[list[float]]:
        return [[0.5] * self.input_width]

    def predict(self, inputs: list[list[float]]) -> list[list[float]]:
        import torch

        if any(len(row) != self.input_width for row in inputs):
            raise ValueError(f"each row of inputs must have {self.input_width} numbers")
        with torch.inference_mode():
            batch = torch.tensor(inputs, dtype=torch.float32, device=self.device)
            result: list[list[float]] = self._net(batch).cpu().tolist()
        return result
