"""Named gMLP and aMLP configurations: data, not code.

Each preset has a `family` (`"image"` for `image_classifier`, `"text"` for
`masked_lm`, `text_classifier` and `causal_lm`), a one-line description and
the keyword configuration that its builder receives. Keyword arguments given
to a builder override the preset's values. The gMLP backbones' and tasks'
`from_preset` take the names too (`keras_gmlp.models.preset_loader`).
"""

PRESETS = {
    # ImageNet-1k models of the paper (224 x 224, 16 x 16 patches).
    # drop_path_rate = 1 - survival probability of the paper.
    "gmlp_ti16_224": {
        "family": "image",
        "description": "gMLP-Ti, ImageNet 224 x 224: 5,867,328 parameters.",
        "config": {
            "image_size": 224,
            "patch_size": 16,
            "num_layers": 30,
            "hidden_dim": 128,
            "ffn_dim": 768,
            "drop_path_rate": 0.0,
            "num_classes": 1000,
        },
    },
    "gmlp_s16_224": {
        "family": "image",
        "description": "gMLP-S, ImageNet 224 x 224: 19,422,656 parameters.",
        "config": {
            "image_size": 224,
            "patch_size": 16,
            "num_layers": 30,
            "hidden_dim": 256,
            "ffn_dim": 1536,
            "drop_path_rate": 0.05,
            "num_classes": 1000,
        },
    },
    "gmlp_b16_224": {
        "family": "image",
        "description": "gMLP-B, ImageNet 224 x 224: 73,075,392 parameters.",
        "config": {
            "image_size": 224,
            "patch_size": 16,
            "num_layers": 30,
            "hidden_dim": 512,
            "ffn_dim": 3072,
            "drop_path_rate": 0.2,
            "num_classes": 1000,
        },
    },
    # CIFAR-sized models: 32 x 32 images, 4 x 4 patches, 64 tokens.
    "gmlp_ti4_32": {
        "family": "image",
        "description": "gMLP-Ti widths on 32 x 32 images, 4 x 4 patches.",
        "config": {
            "image_size": 32,
            "patch_size": 4,
            "num_layers": 30,
            "hidden_dim": 128,
            "ffn_dim": 768,
            "drop_path_rate": 0.0,
            "num_classes": 10,
        },
    },
    "gmlp_s4_32": {
        "family": "image",
        "description": "gMLP-S widths on 32 x 32 images, 4 x 4 patches.",
        "config": {
            "image_size": 32,
            "patch_size": 4,
            "num_layers": 30,
            "hidden_dim": 256,
            "ffn_dim": 1536,
            "drop_path_rate": 0.05,
            "num_classes": 10,
        },
    },
    "gmlp_micro4_32": {
        "family": "image",
        "description": "A 6-block gMLP for CPUs, 32 x 32 images.",
        "config": {
            "image_size": 32,
            "patch_size": 4,
            "num_layers": 6,
            "hidden_dim": 64,
            "ffn_dim": 256,
            "drop_path_rate": 0.0,
            "num_classes": 10,
        },
    },
    # Masked-LM models of the paper: 32K vocabulary, 512 tokens and
    # shift-invariant (Toeplitz) spatial weights.
    "gmlp_base": {
        "family": "text",
        "description": "gMLP-base language model, about 130M parameters.",
        "config": {
            "vocabulary_size": 32000,
            "sequence_length": 512,
            "num_layers": 48,
            "hidden_dim": 512,
            "ffn_dim": 3072,
            "attention_dim": None,
            "spatial": "toeplitz",
        },
    },
    "amlp_base": {
        "family": "text",
        "description": "aMLP-base language model, about 109M parameters.",
        "config": {
            "vocabulary_size": 32000,
            "sequence_length": 512,
            "num_layers": 36,
            "hidden_dim": 512,
            "ffn_dim": 3072,
            "attention_dim": 64,
            "spatial": "toeplitz",
        },
    },
    "gmlp_large": {
        "family": "text",
        "description": "gMLP-large language model, about 365M parameters.",
        "config": {
            "vocabulary_size": 32000,
            "sequence_length": 512,
            "num_layers": 96,
            "hidden_dim": 768,
            "ffn_dim": 3072,
            "attention_dim": None,
            "spatial": "toeplitz",
        },
    },
    "amlp_large": {
        "family": "text",
        "description": "aMLP-large language model, about 316M parameters.",
        "config": {
            "vocabulary_size": 32000,
            "sequence_length": 512,
            "num_layers": 72,
            "hidden_dim": 768,
            "ffn_dim": 3072,
            "attention_dim": 128,
            "spatial": "toeplitz",
        },
    },
    # Small language models that train on two CPU cores.
    "gmlp_tiny": {
        "family": "text",
        "description": "A 4-block gMLP language model for CPUs.",
        "config": {
            "vocabulary_size": 8192,
            "sequence_length": 128,
            "num_layers": 4,
            "hidden_dim": 128,
            "ffn_dim": 512,
            "attention_dim": None,
            "spatial": "toeplitz",
        },
    },
    "amlp_tiny": {
        "family": "text",
        "description": "A 4-block aMLP language model for CPUs.",
        "config": {
            "vocabulary_size": 8192,
            "sequence_length": 128,
            "num_layers": 4,
            "hidden_dim": 128,
            "ffn_dim": 512,
            "attention_dim": 32,
            "spatial": "toeplitz",
        },
    },
}
