"""Built-in PyTorch models, small enough to train on a few CPU cores in seconds.

- ``mlp``: fully connected layers with ReLU over flattened features.
- ``mobilenet-small``: a MobileNet-style CNN for 32×32 images: a 3×3 stem, then
  depthwise-separable blocks (3×3 depthwise conv + 1×1 pointwise conv, Howard et al. 2017),
  global average pooling and a linear classifier.
- ``resnet-small``: a ResNet with basic residual blocks in three stages (He et al. 2016).
- ``transformer-small``: token embedding + learned positions, a Transformer encoder, mean
  pooling and a linear classifier, for integer token sequences.

Normalisation is GroupNorm, never BatchNorm: every piece of state is in the flat parameter
vector that the workers synchronise, and no layer is random (no dropout), so a minibatch
gives the same gradient on any worker.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from faasml._validate import MAX_PARAMS, check_size, count_text, shown
from faasml.exceptions import MissingDependencyError, WorkloadError
from faasml.workloads.torch_model import TorchModel

try:
    import torch
    from torch import nn
except ImportError as err:  # pragma: no cover - torch is installed by the Makefile
    raise MissingDependencyError(
        "'torch' is needed for this model but is not installed; "
        "install it with: pip install 'faasml[torch]'"
    ) from err


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WorkloadError(
            f"the value of model.{name} is {shown(value)}, but must be an integer >= 1"
        )
    return value


def _int_list(name: str, value: Any) -> tuple[int, ...]:
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(items, Sequence) or isinstance(items, str) or not items:
        raise WorkloadError(
            f"the value of model.{name} is {shown(value)}, but must be a non-empty list of integers"
        )
    return tuple(_positive_int(name, item) for item in items)


def _image_shape(model: str, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise WorkloadError(
            f"model '{model}' needs images of shape (channels, height, width), "
            f"but the data has samples of shape {input_shape}"
        )
    return input_shape[0], input_shape[1], input_shape[2]


def _bound(model: str, count: int, *, exact: bool = False, **options: Any) -> None:
    """Refuse a model beyond ``MAX_PARAMS`` from its parameter count, before building it."""
    given = ", ".join(f"{name} {shown(value)}" for name, value in options.items())
    where = f"model '{model}' ({given})"
    check_size(where, count, MAX_PARAMS, "parameters", WorkloadError, at_least=not exact)


def _linear(inputs: int, outputs: int) -> int:
    return (inputs + 1) * outputs


def mlp_params(features: int, widths: Sequence[int], num_classes: int) -> int:
    """Parameters of ``mlp``: one weight matrix and bias per layer (counting stops once past
    ``MAX_PARAMS``, so a count above it is a lower bound)."""
    total, previous = 0, features
    for width in widths:
        total, previous = total + _linear(previous, width), width
        if total > MAX_PARAMS:
            break
    return total + _linear(previous, num_classes)


def mobilenet_params(channels: int, width: int, blocks: int, num_classes: int) -> int:
    """Parameters of ``mobilenet-small`` (counting stops once past ``MAX_PARAMS``,
    so a count above it is a lower bound)."""
    total, current = channels * width * 9 + 2 * width, width
    index = 0
    while index < blocks and total <= MAX_PARAMS:
        out = current * 2 if index % 2 == 0 else current
        total += current * 9 + 2 * current + current * out + 2 * out
        current, index = out, index + 1
    return total + _linear(current, num_classes)


def resnet_params(channels: int, width: int, blocks: Sequence[int], num_classes: int) -> int:
    """Parameters of ``resnet-small`` (counting stops once past ``MAX_PARAMS``,
    so a count above it is a lower bound)."""
    total, current = channels * width * 9 + 2 * width, width
    for stage, count in enumerate(blocks):
        out = width * 2**stage
        body = 18 * out * out + 4 * out  # two 3×3 convolutions and their norms
        first = current * out * 9 + 2 * out + out * out * 9 + 2 * out
        if current != out or stage > 0:
            first += current * out + 2 * out  # the 1×1 projection of the shortcut
        total += first + (count - 1) * body
        current = out
        if total > MAX_PARAMS:
            break
    return total + _linear(current, num_classes)


def transformer_params(
    length: int, num_classes: int, vocab: int, width: int, layers: int, feedforward: int
) -> int:
    """Parameters of ``transformer-small``: embeddings, encoder layers, classifier."""
    layer = _linear(width, 3 * width) + _linear(width, width)  # attention projections
    layer += _linear(width, feedforward) + _linear(feedforward, width) + 4 * width  # + norms
    return vocab * width + length * width + layers * layer + _linear(width, num_classes)


def _norm(channels: int) -> nn.GroupNorm:
    return nn.GroupNorm(math.gcd(4, channels), channels)


def _conv_block(
    inputs: int, outputs: int, *, kernel: int, stride: int = 1, groups: int = 1
) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, kernel, stride, kernel // 2, groups=groups, bias=False),
        _norm(outputs),
        nn.ReLU(),
    )


def mlp(
    input_shape: tuple[int, ...], num_classes: int, hidden: Sequence[int] | int = (64,)
) -> TorchModel:
    """Multi-layer perceptron; option ``hidden``: widths of the hidden layers (default [64])."""
    widths = _int_list("hidden", hidden)
    features = math.prod(input_shape)
    _bound("mlp", mlp_params(features, widths, num_classes), hidden=list(widths))

    def build() -> nn.Module:
        layers: list[nn.Module] = [nn.Flatten()]
        previous = features
        for width in widths:
            layers += [nn.Linear(previous, width), nn.ReLU()]
            previous = width
        layers.append(nn.Linear(previous, num_classes))
        return nn.Sequential(*layers)

    return TorchModel(build, input_shape=input_shape, num_classes=num_classes, name="mlp")


def mobilenet_small(
    input_shape: tuple[int, ...], num_classes: int, width: int = 16, blocks: int = 4
) -> TorchModel:
    """MobileNet-style CNN; ``width``: stem channels (default 16); ``blocks``: separable blocks.

    Block i doubles the channels and halves the resolution on every other block (i = 0, 2, ...).
    """
    channels, _, _ = _image_shape("mobilenet-small", input_shape)
    stem, count = _positive_int("width", width), _positive_int("blocks", blocks)
    _bound(
        "mobilenet-small",
        mobilenet_params(channels, stem, count, num_classes),
        width=stem,
        blocks=count,
    )

    def build() -> nn.Module:
        layers: list[nn.Module] = [_conv_block(channels, stem, kernel=3)]
        current = stem
        for index in range(count):
            stride = 2 if index % 2 == 0 else 1
            out = current * 2 if index % 2 == 0 else current
            layers += [
                _conv_block(current, current, kernel=3, stride=stride, groups=current),
                _conv_block(current, out, kernel=1),
            ]
            current = out
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(current, num_classes)]
        return nn.Sequential(*layers)

    return TorchModel(
        build, input_shape=input_shape, num_classes=num_classes, name="mobilenet-small"
    )


class _BasicBlock(nn.Module):
    """Two 3×3 convolutions with a residual connection (a 1×1 projection when shapes change)."""

    def __init__(self, inputs: int, outputs: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            _conv_block(inputs, outputs, kernel=3, stride=stride),
            nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False),
            _norm(outputs),
        )
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or inputs != outputs:
            self.shortcut = nn.Sequential(
                nn.Conv2d(inputs, outputs, 1, stride, bias=False), _norm(outputs)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.body(x) + self.shortcut(x))


def resnet_small(
    input_shape: tuple[int, ...],
    num_classes: int,
    width: int = 16,
    blocks: Sequence[int] | int = (1, 1, 1),
) -> TorchModel:
    """ResNet with basic blocks; ``width``: first stage channels; ``blocks``: blocks per stage.

    Each stage after the first doubles the channels and halves the resolution.
    """
    channels, _, _ = _image_shape("resnet-small", input_shape)
    base, stages = _positive_int("width", width), _int_list("blocks", blocks)
    _bound(
        "resnet-small",
        resnet_params(channels, base, stages, num_classes),
        width=base,
        blocks=list(stages),
    )

    def build() -> nn.Module:
        layers: list[nn.Module] = [_conv_block(channels, base, kernel=3)]
        current = base
        for stage, count in enumerate(stages):
            out = base * 2**stage
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                layers.append(_BasicBlock(current, out, stride))
                current = out
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(current, num_classes)]
        return nn.Sequential(*layers)

    return TorchModel(build, input_shape=input_shape, num_classes=num_classes, name="resnet-small")


class _SequenceClassifier(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        length: int,
        num_classes: int,
        d_model: int,
        heads: int,
        layers: int,
        feedforward: int,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.position = nn.Parameter(torch.randn(1, length, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, heads, feedforward, dropout=0.0, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        tokens = tokens.long()
        if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size):
            raise WorkloadError(
                f"token ids must lie in [0, {self.vocab_size}) (model.vocab_size), got values "
                f"in [{int(tokens.min())}, {int(tokens.max())}]"
            )
        hidden = self.encoder(self.embedding(tokens) + self.position)
        result: torch.Tensor = self.head(hidden.mean(dim=1))
        return result


def transformer_small(
    input_shape: tuple[int, ...],
    num_classes: int,
    vocab_size: int = 64,
    d_model: int = 32,
    heads: int = 2,
    layers: int = 2,
    feedforward: int = 64,
) -> TorchModel:
    """Transformer encoder classifier over token sequences of shape (length,)."""
    if len(input_shape) != 1:
        raise WorkloadError(
            "model 'transformer-small' needs token sequences of shape (length,), "
            f"but the data has samples of shape {input_shape}"
        )
    vocab, width = _positive_int("vocab_size", vocab_size), _positive_int("d_model", d_model)
    n_heads, depth = _positive_int("heads", heads), _positive_int("layers", layers)
    hidden = _positive_int("feedforward", feedforward)
    if width % n_heads:
        raise WorkloadError(
            f"the value of model.d_model is {count_text(width)}, "
            f"but must be a multiple of model.heads ({count_text(n_heads)})"
        )
    _bound(
        "transformer-small",
        transformer_params(input_shape[0], num_classes, vocab, width, depth, hidden),
        exact=True,
        vocab_size=vocab,
        d_model=width,
        layers=depth,
        feedforward=hidden,
    )

    def build() -> nn.Module:
        return _SequenceClassifier(
            vocab, input_shape[0], num_classes, width, n_heads, depth, hidden
        )

    return TorchModel(
        build, input_shape=input_shape, num_classes=num_classes, name="transformer-small"
    )
