"""keras-hub models matched by size to a gMLP, for fair comparisons.

Each baseline is a keras-hub task of the given width, feed-forward size and
depth, wrapped to take the very batches the gMLP models of the training
workflows take (the padding mask, id 0, and the single segment are made
inside), so both train on the same data, targets and schedule:

| objective | name            | keras-hub task                             |
|-----------|-----------------|--------------------------------------------|
| masked LM | `"bert"`        | `BertMaskedLM`: post-norm encoder, learned |
|           |                 | absolute positions                         |
| masked LM | `"roformer_v2"` | `RoformerV2MaskedLM`: rotary positions, no |
|           |                 | biases, scale-only norms                   |
| masked LM | `"deberta_v3"`  | `DebertaV3MaskedLM`: disentangled relative |
|           |                 | position attention                         |
| masked LM | `"fnet"`        | `FNetMaskedLM`: attention-free, Fourier    |
|           |                 | token mixing, learned absolute positions   |
| causal LM | `"gpt2"`        | `GPT2CausalLM`: pre-norm causal decoder,   |
|           |                 | learned absolute positions                 |
| image     | `"vit"`         | `ViTImageClassifier`: class token, learned |
|           |                 | absolute positions (DeiT's model)          |

The masked-LM heads predict over the transposed token embedding (tied).
`matched_size` searches the depth and feed-forward size (at the gMLP's
width, or over given widths) whose parameter count matches the gMLP's;
`masked_lm_parameters` and `image_classifier_parameters` count a candidate.
`LEARNING_RATES` holds each architecture's default peak learning rate,
used when a run gives none (`default_learning_rate`).

This module imports keras-hub only when a baseline is built. The masked-LM
baselines take their inputs through `keras_gmlp.models.BertInputs`, which
`import keras_gmlp.models` registers, so a checkpoint holding a baseline
loads after it (and `import keras_hub`).
"""

import math

import keras

from keras_gmlp.models.gmlp_text.bert_inputs import BertInputs


def bert_masked_lm(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub BERT masked LM that takes the gMLP batches.

    keras-hub's `BertMaskedLM` (post-norm BERT encoder with learned
    absolute positions, and BERT's masked-LM head over the transposed token
    embedding), wrapped to take the same `{"token_ids", "mask_positions"}`
    inputs as the gMLP training model.

    Args:
        vocabulary_size: int.
        sequence_length: int. Largest number of tokens.
        num_layers: int. Transformer layers.
        hidden_dim: int. Width of the tokens.
        ffn_dim: int. Width of the feed-forward layers.
        num_heads: int. Attention heads; defaults to one per 64 channels.
        dropout: float. Dropout of the encoder. Defaults to `0.0`.

    Returns:
        `(training_model, masked_lm)`: the wrapper and the keras-hub task.
    """
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=default_heads(hidden_dim, num_heads),
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        dropout=dropout,
        max_sequence_length=sequence_length,
        num_segments=1,
    )
    return _masked_lm_training_model(
        keras_hub.models.BertMaskedLM, backbone, "transformer", "bert_inputs"
    )


def roformer_v2_masked_lm(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub RoFormerV2 masked LM that takes the gMLP batches.

    keras-hub's `RoformerV2MaskedLM`: rotary position embeddings in every
    attention layer (no position weights), no biases, scale-only norms,
    and a head over the transposed token embedding. Arguments and return
    value as `bert_masked_lm` (`sequence_length` is not a weight's size:
    rotary positions have none).
    """
    import keras_hub

    num_heads = default_heads(hidden_dim, num_heads)
    backbone = keras_hub.models.RoformerV2Backbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        head_size=hidden_dim // num_heads,
        dropout=dropout,
        num_segments=1,
    )
    return _masked_lm_training_model(
        keras_hub.models.RoformerV2MaskedLM, backbone, "roformer_v2"
    )


def deberta_v3_masked_lm(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub DeBERTaV3 masked LM that takes the gMLP batches.

    keras-hub's `DebertaV3MaskedLM`: disentangled attention over content
    and relative positions (shared relative embeddings, no absolute
    positions), and a head over the transposed token embedding. The
    relative positions get `2 * sequence_length` buckets (at most 256,
    DeBERTa-v3's), so every distance within a sequence has its own.
    Arguments and return value as `bert_masked_lm`.
    """
    import keras_hub

    backbone = keras_hub.models.DebertaV3Backbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=default_heads(hidden_dim, num_heads),
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        dropout=dropout,
        max_sequence_length=sequence_length,
        bucket_size=min(256, 2 * sequence_length),
    )
    return _masked_lm_training_model(
        keras_hub.models.DebertaV3MaskedLM, backbone, "deberta_v3"
    )


def fnet_masked_lm(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub FNet masked LM that takes the gMLP batches.

    keras-hub's `FNetMaskedLM`: attention-free, each layer mixes the tokens
    with a 2D Fourier transform (no weights, no padding mask), learned
    absolute positions, a head over the transposed token embedding.
    Arguments and return value as `bert_masked_lm`; `num_heads` is unused.
    """
    import keras_hub

    del num_heads
    backbone = keras_hub.models.FNetBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        dropout=dropout,
        max_sequence_length=sequence_length,
        num_segments=1,
    )
    return _masked_lm_training_model(
        keras_hub.models.FNetMaskedLM, backbone, "fnet"
    )


def _masked_lm_training_model(task_class, backbone, name, inputs_name=None):
    """`(training_model, masked_lm)`: the keras-hub task over `backbone`,
    and a model taking `{"token_ids", "mask_positions"}` that makes the
    task's other inputs (padding mask, segment ids) from the token ids."""
    if "pooled_dense" in [layer.name for layer in backbone.layers]:
        # The pooler is not used by masked-LM training: keep it out of the
        # gradients (and of weight decay).
        backbone.get_layer("pooled_dense").trainable = False
    masked_lm = task_class(backbone, preprocessor=None)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    mask_positions = keras.Input(
        shape=(None,), dtype="int32", name="mask_positions"
    )
    expected = masked_lm.input
    mask_dtype = "bool"
    if "padding_mask" in expected:
        mask_dtype = expected["padding_mask"].dtype
    padding_mask, segment_ids = BertInputs(
        mask_dtype=mask_dtype, name=inputs_name or f"{name}_inputs"
    )(token_ids)
    available = {
        "token_ids": token_ids,
        "segment_ids": segment_ids,
        "padding_mask": padding_mask,
        "mask_positions": mask_positions,
    }
    logits = masked_lm({key: available[key] for key in expected})
    training_model = keras.Model(
        {"token_ids": token_ids, "mask_positions": mask_positions},
        logits,
        name=f"{name}_masked_lm_training",
    )
    return training_model, masked_lm


def gpt2_causal_lm(
    vocabulary_size,
    sequence_length,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
):
    """Builds a keras-hub GPT-2 causal LM that takes the gMLP batches.

    keras-hub's `GPT2CausalLM` (pre-norm causal Transformer decoder with
    learned absolute positions, logits over the transposed token
    embedding) of the given size, wrapped to take token ids alone, as the
    gMLP `causal_lm` does.

    Args:
        vocabulary_size: int.
        sequence_length: int. Largest number of tokens.
        num_layers: int. Transformer layers.
        hidden_dim: int. Width of the tokens.
        ffn_dim: int. Width of the feed-forward layers.
        num_heads: int. Attention heads; defaults to one per 64 channels.
        dropout: float. Dropout of the decoder. Defaults to `0.0`.

    Returns:
        A `keras.Model` from token ids `(batch, tokens)` to next-token
        logits `(batch, tokens, vocabulary_size)`.
    """
    import keras_hub

    num_heads = default_heads(hidden_dim, num_heads)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=num_heads,
        hidden_dim=hidden_dim,
        intermediate_dim=ffn_dim,
        dropout=dropout,
        max_sequence_length=sequence_length,
    )
    causal_lm = keras_hub.models.GPT2CausalLM(backbone, preprocessor=None)
    token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
    padding_mask, _ = BertInputs(mask_dtype="int32", name="gpt2_inputs")(
        token_ids
    )
    logits = causal_lm({"token_ids": token_ids, "padding_mask": padding_mask})
    return keras.Model(token_ids, logits, name="transformer_causal_lm")


def vit_image_classifier(
    image_size,
    patch_size,
    num_channels,
    num_classes,
    num_layers,
    hidden_dim,
    ffn_dim,
    num_heads=None,
    dropout=0.0,
    preprocessor=None,
    head_dtype=None,
):
    """Builds a keras-hub ViT image classifier (DeiT's model).

    keras-hub's `ViTBackbone` (patch embedding, class token, learned
    absolute positions, pre-norm encoder) and `ViTImageClassifier` (a
    linear head over the class token).

    Args:
        image_size: int or `(height, width)`.
        patch_size: int or `(height, width)`.
        num_channels: int.
        num_classes: int.
        num_layers: int. Transformer layers.
        hidden_dim: int. Width of the tokens.
        ffn_dim: int. Width of the feed-forward layers (ViT's `mlp_dim`).
        num_heads: int. Attention heads; defaults to one per 64 channels.
        dropout: float. Dropout before the head. Defaults to `0.0`.
        preprocessor: a keras-hub preprocessor or `None`.
        head_dtype: dtype policy of the head, or `None`.

    Returns:
        A `keras_hub.models.ViTImageClassifier`.
    """
    import keras_hub

    height, width = _pair(image_size)
    backbone = keras_hub.models.ViTBackbone(
        image_shape=(height, width, num_channels),
        patch_size=_pair(patch_size),
        num_layers=num_layers,
        num_heads=default_heads(hidden_dim, num_heads),
        hidden_dim=hidden_dim,
        mlp_dim=ffn_dim,
    )
    return keras_hub.models.ViTImageClassifier(
        backbone,
        num_classes,
        preprocessor=preprocessor,
        dropout=dropout,
        head_dtype=head_dtype,
        name="vit_image_classifier",
    )


def _pair(value):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * 2


# Baselines by name: builders taking (vocabulary_size, sequence_length,
# num_layers, hidden_dim, ffn_dim, num_heads, dropout).
MASKED_LM_BASELINES = {
    "bert": bert_masked_lm,
    "roformer_v2": roformer_v2_masked_lm,
    "deberta_v3": deberta_v3_masked_lm,
    "fnet": fnet_masked_lm,
}
CAUSAL_LM_BASELINES = {"gpt2": gpt2_causal_lm}
# `--architecture` of each job: "transformer" is the Transformer of the
# objective (BERT, GPT-2), as in earlier versions.
ARCHITECTURES = {
    "mlm": ("gmlp", "transformer", *MASKED_LM_BASELINES),
    "causal": ("gmlp", "transformer", "gpt2"),
    "image": ("gmlp", "vit", "deit"),
}
# "deit" is the ViT: DeiT is ViT trained with DeiT's recipe (RandAugment,
# MixUp/CutMix, label smoothing, AdamW, cosine decay), which the image
# pipeline applies to every architecture.
ALIASES = {
    "mlm": {"transformer": "bert"},
    "causal": {"transformer": "gpt2"},
    "image": {"deit": "vit"},
}

# Default peak learning rates by job and architecture, for a global batch
# of the job's `--per-replica-batch-size` (text) or of the dataset's
# `learning_rate_batch_size` (images), used when a run gives no
# `--learning-rate`. The masked-LM rates won a seeded sweep
# (`benchmarks/sweep.py`, `benchmarks/results/sweep_mlm_pydocs.json`: tiny
# models of 1.4 M parameters, batches of 32 x 128, 300 s on one core; 5e-4
# to 8e-3 tried, each best rate inside its grid); longer or larger runs may
# want less.
# The other rates are starting values from the small-model literature
# (GPT-3 Small 6e-4, DeiT 5e-4 per 512 images, so 4e-3 for the ImageNet
# row's batch of 4096).
LEARNING_RATES = {
    "mlm": {
        "gmlp": 4e-3,
        "bert": 2e-3,
        "roformer_v2": 4e-3,
        "deberta_v3": 2e-3,
        "fnet": 1e-3,
    },
    "causal": {"gmlp": 1e-3, "gpt2": 6e-4},
    # Images: None keeps the dataset's own (the gMLP recipe's) value. The
    # ViT's digits rate won a seeded sweep
    # (`benchmarks/results/sweep_digits32.json`: 5e-4 to 8e-3 tried, 8e-3
    # unstable; the gMLP's own 3e-3 tied there with 1.5e-3).
    "image": {
        "gmlp": {
            "digits": None,
            "cifar": None,
            "folder": None,
            "imagenet": None,
        },
        # A folder takes CIFAR's recipe, and its rate.
        "vit": {
            "digits": 4e-3,
            "cifar": 5e-4,
            "folder": 5e-4,
            "imagenet": 4e-3,
        },
    },
}


def canonical_architecture(job, architecture):
    """The architecture's own name (`"transformer"` -> `"bert"` / `"gpt2"`,
    `"deit"` -> `"vit"`).

    Args:
        job: str. `"mlm"`, `"causal"` or `"image"`.
        architecture: str. One of `ARCHITECTURES[job]`.

    Raises:
        ValueError: naming the job's architectures.
    """
    if job not in ARCHITECTURES:
        raise ValueError(
            f"Received job={job!r}; expected one of {sorted(ARCHITECTURES)}."
        )
    if architecture not in ARCHITECTURES[job]:
        raise ValueError(
            f"Received architecture={architecture!r} for {job!r}; expected "
            f"one of {list(ARCHITECTURES[job])}."
        )
    return ALIASES.get(job, {}).get(architecture, architecture)


def default_learning_rate(job, architecture, dataset_family=None):
    """The default peak learning rate of `architecture` (`LEARNING_RATES`).

    Args:
        job: str. `"mlm"`, `"causal"` or `"image"`.
        architecture: str. One of `ARCHITECTURES[job]` (aliases too).
        dataset_family: str. For `"image"`: `"digits"`, `"cifar"`,
            `"folder"` or `"imagenet"`.

    Returns:
        A float, or `None` where the dataset's default applies.

    Example:

    >>> from keras_gmlp.baselines import default_learning_rate
    >>> default_learning_rate("mlm", "transformer")
    0.002
    """
    rates = LEARNING_RATES[job][canonical_architecture(job, architecture)]
    if job == "image":
        return rates[dataset_family]
    return rates


def masked_lm_baseline(name, **size):
    """Builds the masked-LM baseline `name` of `MASKED_LM_BASELINES`.

    Args:
        name: str. A key of `MASKED_LM_BASELINES`.
        **size: the builder's keywords (`vocabulary_size`,
            `sequence_length`, `num_layers`, `hidden_dim`, `ffn_dim`,
            `num_heads`, `dropout`).

    Returns:
        `(training_model, masked_lm)`, as `bert_masked_lm`.
    """
    return _pick(MASKED_LM_BASELINES, name, "masked-LM")(**size)


def causal_lm_baseline(name, **size):
    """Builds the causal-LM baseline `name` of `CAUSAL_LM_BASELINES`.

    Args:
        name: str. A key of `CAUSAL_LM_BASELINES`.
        **size: the builder's keywords, as `masked_lm_baseline`.

    Returns:
        A `keras.Model` from token ids to next-token logits.
    """
    return _pick(CAUSAL_LM_BASELINES, name, "causal-LM")(**size)


def _pick(table, name, kind):
    if name not in table:
        raise ValueError(
            f"Unknown {kind} baseline {name!r}; expected one of "
            f"{sorted(table)}."
        )
    return table[name]


def default_heads(hidden_dim, num_heads=None):
    """Attention heads: `num_heads`, else one per 64 channels.

    Raises:
        ValueError: when `hidden_dim` is not divisible by the heads.
    """
    num_heads = num_heads or max(1, hidden_dim // 64)
    if hidden_dim % num_heads:
        raise ValueError(
            f"hidden_dim {hidden_dim} is not divisible by num_heads "
            f"{num_heads}."
        )
    return num_heads


def trainable_parameters(model):
    """Trainable parameters of `model`, each shared variable counted once."""
    unique = {id(v): v for v in model.trainable_weights}.values()
    return int(sum(math.prod(v.shape) for v in unique))


def masked_lm_parameters(
    name, vocabulary_size, sequence_length, num_layers, hidden_dim, ffn_dim,
    num_heads=None,
):  # fmt: skip
    """Trainable parameters of the masked-LM baseline `name` of that size."""
    model, _ = masked_lm_baseline(
        name,
        vocabulary_size=vocabulary_size,
        sequence_length=sequence_length,
        num_layers=num_layers,
        hidden_dim=hidden_dim,
        ffn_dim=ffn_dim,
        num_heads=num_heads,
    )
    return trainable_parameters(model)


def image_classifier_parameters(
    image_size, patch_size, num_channels, num_classes, num_layers,
    hidden_dim, ffn_dim, num_heads=None,
):  # fmt: skip
    """Trainable parameters of the ViT classifier of that size."""
    return trainable_parameters(
        vit_image_classifier(
            image_size,
            patch_size,
            num_channels,
            num_classes,
            num_layers,
            hidden_dim,
            ffn_dim,
            num_heads,
        )  # fmt: skip
    )


def matched_size(
    count,
    target,
    hidden_dims,
    num_layers=None,
    max_layers=48,
    ffn_ratio=4.0,
    multiple=8,
    tolerance=0.02,
):
    """The depth, width and feed-forward size whose parameters match.

    `count(num_layers, hidden_dim, ffn_dim)` must grow linearly with the
    depth and, at a fixed depth, with the feed-forward size, as it does in
    every Transformer (and FNet): its three values at depths 1 and 2 and
    two feed-forward sizes give the parameters of the shared parts, of a
    layer, and of a feed-forward channel. For each width and depth, the
    feed-forward size that matches `target` follows; the pair kept is the
    one whose feed-forward size is nearest `ffn_ratio` times the width
    (the architecture's usual shape), among those within `tolerance`.

    Args:
        count: callable `(num_layers, hidden_dim, ffn_dim) -> int`.
        target: int. The parameters to match (the gMLP's).
        hidden_dims: list of int. Widths searched.
        num_layers: int or `None`. A fixed depth; `None` searches
            `1..max_layers`.
        max_layers: int. Defaults to `48`.
        ffn_ratio: float. Preferred feed-forward size over width.
            Defaults to `4.0`.
        multiple: int. Feed-forward sizes are rounded to a multiple of
            this where that stays within `tolerance`. Defaults to `8`.
        tolerance: float. Largest relative difference wanted. Defaults to
            `0.02`.

    Returns:
        A dict of `num_layers`, `hidden_dim`, `ffn_dim`, `parameters` (as
        `count` gives them) and `target`.

    Raises:
        ValueError: when no size comes within `tolerance` of `target`.

    Example:

    >>> from keras_gmlp.baselines import matched_size
    >>> count = lambda layers, width, ffn: 1000 + layers * (
    ...     4 * width * width + 2 * width * ffn)
    >>> size = matched_size(count, 50_000, [16])
    >>> size["num_layers"], size["ffn_dim"]
    (16, 64)
    """
    candidates = []
    for hidden_dim in hidden_dims:
        f0 = max(multiple, int(ffn_ratio * hidden_dim))
        one = count(1, hidden_dim, f0)
        shared = 2 * one - count(2, hidden_dim, f0)
        per_channel = (count(1, hidden_dim, 2 * f0) - one) / f0
        per_layer = one - shared - per_channel * f0
        depths = [num_layers] if num_layers else range(1, max_layers + 1)
        for depth in depths:
            exact = ((target - shared) / depth - per_layer) / per_channel
            for step in (multiple, 1):
                ffn_dim = max(1, step * round(exact / step))
                parameters = shared + depth * (
                    per_layer + per_channel * ffn_dim
                )
                error = abs(parameters - target) / target
                if error <= tolerance:
                    break
            candidates.append(
                (
                    error > tolerance,
                    abs(math.log(ffn_dim / (ffn_ratio * hidden_dim))),
                    error,
                    {
                        "num_layers": depth,
                        "hidden_dim": hidden_dim,
                        "ffn_dim": ffn_dim,
                        "parameters": int(round(parameters)),
                        "target": int(target),
                    },
                )
            )
    too_far, _, error, best = min(candidates, key=lambda c: c[:3])
    if too_far:
        raise ValueError(
            f"No size within {tolerance:.0%} of {target} parameters (the "
            f"nearest, {best}, is {error:.1%} off); expected widths "
            f"{list(hidden_dims)} and depths up to {max_layers} to reach it."
        )
    return best
