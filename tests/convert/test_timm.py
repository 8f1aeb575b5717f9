"""The timm converter against a PyTorch gMLP with timm's weight names.

timm itself cannot be imported here (its torchvision dependency has no CPU
build matching torch 2.13 on PyPI), so the reference below rebuilds timm's
module tree and names from `torch.nn` layers, following the structure that
`shared/reference/gmlp.md` documents. It shares no code with keras_gmlp.
"""

import keras
import numpy as np
import pytest

from keras_gmlp import models
from keras_gmlp.convert import load_timm_weights

torch = pytest.importorskip("torch")
nn = torch.nn


class Stem(nn.Module):
    def __init__(self, dim, patch):
        super().__init__()
        self.proj = nn.Conv2d(3, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class Gate(nn.Module):
    def __init__(self, dim, tokens):
        super().__init__()
        self.norm = nn.LayerNorm(dim // 2)  # eps 1e-5, PyTorch's default
        self.proj = nn.Linear(tokens, tokens)

    def forward(self, x):
        u, v = x.chunk(2, dim=-1)
        v = self.proj(self.norm(v).transpose(-1, -2)).transpose(-1, -2)
        return u * v


class GatedMlp(nn.Module):
    def __init__(self, dim, hidden, tokens):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.gate = Gate(hidden, tokens)
        self.fc2 = nn.Linear(hidden // 2, dim)

    def forward(self, x):
        return self.fc2(self.gate(nn.functional.gelu(self.fc1(x))))


class Block(nn.Module):
    def __init__(self, dim, hidden, tokens):
        super().__init__()
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.mlp_channels = GatedMlp(dim, hidden, tokens)

    def forward(self, x):
        return x + self.mlp_channels(self.norm(x))


class TorchGMLP(nn.Module):
    def __init__(self, dim, hidden, depth, patch, image, classes):
        super().__init__()
        tokens = (image // patch) ** 2
        self.stem = Stem(dim, patch)
        self.blocks = nn.Sequential(
            *[Block(dim, hidden, tokens) for _ in range(depth)]
        )
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.norm(self.blocks(self.stem(x)))
        return self.head(x.mean(dim=1))


def keras_gmlp_model(num_classes, num_layers):
    """The Keras counterpart of `TorchGMLP(16, 48, ..., patch=4, image=16)`."""
    return models.image_classifier(
        num_classes=num_classes,
        image_size=16,
        patch_size=4,
        num_layers=num_layers,
        hidden_dim=16,
        ffn_dim=48,
    )


def test_converted_weights_reproduce_the_torch_model():
    torch.manual_seed(0)
    reference = TorchGMLP(16, 48, 3, patch=4, image=16, classes=7).eval()
    with torch.no_grad():  # move the gate away from its identity start
        for name, parameter in reference.named_parameters():
            if "gate.proj" in name:
                parameter.normal_(0.0, 0.3)
    model = keras_gmlp_model(num_classes=7, num_layers=3)
    load_timm_weights(model, reference.state_dict())
    images = np.random.default_rng(0).normal(size=(2, 16, 16, 3))
    images = images.astype("float32")
    with torch.no_grad():
        expected = reference(torch.from_numpy(images.transpose(0, 3, 1, 2)))
    output = keras.ops.convert_to_numpy(model(images))
    np.testing.assert_allclose(output, expected.numpy(), rtol=1e-4, atol=1e-4)


def test_mismatched_state_dict_raises():
    reference = TorchGMLP(16, 48, 2, patch=4, image=16, classes=7)
    model = keras_gmlp_model(num_classes=7, num_layers=3)
    with pytest.raises(ValueError, match="missing.*blocks.2"):
        load_timm_weights(model, reference.state_dict())
    model = keras_gmlp_model(num_classes=5, num_layers=2)
    with pytest.raises(ValueError, match="'head.weight' has shape"):
        load_timm_weights(model, reference.state_dict())


def test_keras_weights_left_unset_raise_and_change_nothing():
    # The tiny attention of an aMLP image model has no timm counterpart:
    # loading must not leave its weights random without a word.
    reference = TorchGMLP(16, 48, 2, patch=4, image=16, classes=7)
    model = models.image_classifier(
        num_classes=7,
        image_size=16,
        patch_size=4,
        num_layers=2,
        hidden_dim=16,
        ffn_dim=48,
        attention_dim=8,
    )
    before = [keras.ops.convert_to_numpy(w) for w in model.weights]
    with pytest.raises(ValueError, match="tiny_attention/qkv/kernel") as error:
        load_timm_weights(model, reference.state_dict())
    # All 8 weights (2 blocks x 2 projections x kernel and bias) are named.
    assert str(error.value).count("tiny_attention/") == 8
    for weight, old in zip(model.weights, before, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), old)
