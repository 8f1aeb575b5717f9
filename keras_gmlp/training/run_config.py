"""One configuration object per training job, built from flags in one place.

`TrainingConfig` holds what every job shares (epochs, batch, learning rate
and schedule, seed, precision, strategy, outputs); each job extends it:
`ImageClassificationConfig`, `PretrainingConfig` (masked or causal
language model) and `TextClassificationConfig`. A flag's value goes
straight from the command line (`keras_gmlp.training.arguments`) into a
field of the job's config, and from there into the explicit arguments of
the library functions: nothing else reads the flags. The defaults of the
flags are the defaults of the fields. A run writes its config, as a dict,
into `results.json` (`"arguments"`) and `run_config.json`.

Example:

>>> from keras_gmlp.training.run_config import ImageClassificationConfig
>>> config = ImageClassificationConfig(dataset="digits", epochs=2)
>>> config = config.resolved()  # the dataset's defaults for unset fields
>>> config.global_batch_size(num_replicas=2)
128
"""

import dataclasses

# The `--strategy` choices (`keras_gmlp.training.get_distribution`).
STRATEGIES = (
    "auto",
    "none",
    "mirrored",
    "multi_worker",
    "tpu",
    "data_parallel",
)
MIXED_PRECISION = ("none", "mixed_float16", "mixed_bfloat16")
JIT_COMPILE = ("auto", "true", "false")
REMAT = ("none", "activations")


def global_batch_size(num_replicas, per_replica_batch_size, batch_size=None):
    """The global batch: `batch_size`, else per-replica times replicas.

    Args:
        num_replicas: int. Replicas training in sync.
        per_replica_batch_size: int. Examples per replica and step.
        batch_size: int or `None`. A global batch given directly.

    Raises:
        ValueError: when `batch_size` is not divisible by the replicas.
    """
    if batch_size is None:
        return per_replica_batch_size * num_replicas
    if batch_size % num_replicas:
        raise ValueError(
            f"--batch-size {batch_size} is not divisible by the "
            f"{num_replicas} replicas."
        )
    return batch_size


def scaled_learning_rate(learning_rate, batch_size, reference_batch_size):
    """`learning_rate`, given for `reference_batch_size`, at `batch_size`.

    Linear scaling: twice the batch, twice the learning rate.
    """
    return learning_rate * batch_size / reference_batch_size


def warmup_steps(warmup, total_steps):
    """Warmup as a step count: a fraction of `total_steps` when < 1."""
    if warmup < 1:
        return int(round(warmup * total_steps))
    return min(int(warmup), total_steps)


@dataclasses.dataclass
class TrainingConfig:
    """What every training job shares.

    Attributes:
        epochs: int. Epochs of the run.
        batch_size: int or `None`. Global batch over all replicas; `None`
            for `per_replica_batch_size` times the replicas.
        per_replica_batch_size: int. Examples per replica and step.
        learning_rate: float. Peak learning rate for a global batch of
            `learning_rate_batch_size`, scaled linearly to the real one.
        learning_rate_batch_size: int or `None`. The batch that
            `learning_rate` is given for; `None` for
            `per_replica_batch_size`.
        weight_decay: float. AdamW's decoupled weight decay.
        clipnorm: float. Largest global norm of all gradients together
            (`adamw`'s `global_clipnorm`); 0 disables clipping.
        warmup: float. A fraction of all steps when < 1, else a step count.
        steps_per_epoch: int or `None`. `None` for a pass over the data.
        seed: int. Seed of every random generator.
        mixed_precision: str. `"none"`, `"mixed_float16"` or
            `"mixed_bfloat16"`.
        jit_compile: str. `"auto"`, `"true"` or `"false"` (Keras'
            `jit_compile`).
        remat: str. `"none"` or `"activations"`: the `keras.RematScope`
            mode the models are made under. With `"activations"` the
            spatial gating units recompute their GELU and norm in the
            backward pass under TensorFlow too (as they always do under
            JAX and torch): less memory, slower steps there.
        strategy: str. One of `keras_gmlp.training.STRATEGIES`.
        split_cpu: int or `None`. Split the host CPU into this many
            devices, to try strategies without accelerators.
        output_dir: str. The run's folder. A folder holding a run of
            the same configuration resumes it (or finds it complete); one
            holding another run is refused
            (`keras_gmlp.workflows.run_folder.claim`).
        tensorboard: bool. Whether to write TensorBoard logs.
        verbose: int. Keras' `verbose` (0, 1 or 2).
        overwrite: bool. Whether to move a run already in `output_dir`
            aside (to a sibling folder) and start a new one.
        allow_skipped: bool. Whether to train on data of which more than
            half of the records are skipped (not decodable, empty, with
            unknown labels); else the run stops, with the counts.
    """

    epochs: int = 10
    batch_size: int = None
    per_replica_batch_size: int = 64
    learning_rate: float = 1e-3
    learning_rate_batch_size: int = None
    weight_decay: float = 0.05
    clipnorm: float = 1.0
    warmup: float = 0.05
    steps_per_epoch: int = None
    seed: int = 0
    mixed_precision: str = "none"
    jit_compile: str = "auto"
    remat: str = "none"
    strategy: str = "auto"
    split_cpu: int = None
    output_dir: str = "runs/latest"
    tensorboard: bool = True
    verbose: int = 1
    overwrite: bool = False
    allow_skipped: bool = False

    def __post_init__(self):
        _check_choice("mixed_precision", self.mixed_precision, MIXED_PRECISION)
        _check_choice("jit_compile", self.jit_compile, JIT_COMPILE)
        _check_choice("remat", self.remat, REMAT)
        _check_choice("strategy", self.strategy, STRATEGIES)
        if self.epochs is not None and self.epochs < 1:
            raise ValueError(f"Received epochs={self.epochs}; expected >= 1.")

    def global_batch_size(self, num_replicas):
        """The global batch for `num_replicas` replicas."""
        return global_batch_size(
            num_replicas, self.per_replica_batch_size, self.batch_size
        )

    def peak_learning_rate(self, batch_size):
        """`learning_rate` scaled to the global `batch_size`."""
        reference = self.learning_rate_batch_size or self.per_replica_batch_size
        return scaled_learning_rate(self.learning_rate, batch_size, reference)

    def warmup_steps(self, total_steps):
        """`warmup` as a step count of a run of `total_steps`."""
        return warmup_steps(self.warmup, total_steps)

    def keras_jit_compile(self):
        """`jit_compile` as the value `model.compile` takes."""
        return {"auto": "auto", "true": True, "false": False}[self.jit_compile]

    def remat_scope(self):
        """The `keras.RematScope` to make the run's models under."""
        import keras

        return keras.RematScope(
            mode=None if self.remat == "none" else self.remat
        )

    def to_dict(self):
        """The config as a JSON-serialisable dict, field by field."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values):
        """Rebuilds a config from `to_dict()`; unknown keys are ignored.

        Older runs' files may hold keys that are no longer fields.
        """
        names = {field.name for field in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})


# The paper's recipe for the real image datasets; a small fast one for
# digits. Fields left `None` in an `ImageClassificationConfig` take these.
PAPER_AUGMENTATION = {
    "flip": True,
    "randaugment_ops": 2,
    "randaugment_magnitude": 0.5,
    "mixup": 0.8,
    "cutmix": 1.0,
    "switch_probability": 0.5,
    "random_erasing": 0.0,
    "translate": 0.0,
    "label_smoothing": 0.1,
}
IMAGE_DATASET_DEFAULTS = {
    "digits": {
        "model": {
            "image_size": 16,
            "patch_size": 4,
            "num_layers": 4,
            "hidden_dim": 64,
            "ffn_dim": 256,
        },
        "epochs": 20,
        "per_replica_batch_size": 64,
        "learning_rate": 3e-3,
        "learning_rate_batch_size": 64,
        "warmup": 0.05,
        "flip": False,
        "randaugment_ops": 0,
        "mixup": 0.0,
        "cutmix": 0.0,
        "translate": 0.1,
        "crop_padding": 0,
        "label_smoothing": 0.1,
    },
    "cifar": {
        "preset": "gmlp_s4_32",
        "epochs": 300,
        "per_replica_batch_size": 128,
        "learning_rate": 1e-3,
        "learning_rate_batch_size": 512,
        "warmup": 0.05,
        "crop_padding": 4,
        **PAPER_AUGMENTATION,
    },
    # A folder of images (`folder:PATH`) or another tensorflow-datasets
    # image dataset (`tfds:NAME`): the small-image recipe of CIFAR,
    # gMLP-S at 32 px, for 100 epochs. The paper's ImageNet recipe (224
    # px, 300 epochs, a learning rate for batches of 4096) is for
    # ImageNet; a folder takes it with `--dataset imagenet2012
    # --data-dir PATH`.
    "folder": {
        "preset": "gmlp_s4_32",
        "epochs": 100,
        "per_replica_batch_size": 128,
        "learning_rate": 1e-3,
        "learning_rate_batch_size": 512,
        "warmup": 0.05,
        "crop_padding": 4,
        **PAPER_AUGMENTATION,
    },
    "imagenet": {
        "preset": "gmlp_s16_224",
        "epochs": 300,
        "per_replica_batch_size": 128,
        "learning_rate": 1e-3,
        "learning_rate_batch_size": 4096,
        "warmup": 10000,
        "crop_padding": 0,
        "random_resized_crop": True,
        **PAPER_AUGMENTATION,
    },
}
# What any image dataset falls back to.
IMAGE_BASE_DEFAULTS = {
    "epochs": 10,
    "per_replica_batch_size": 64,
    "learning_rate": 1e-3,
    "warmup": 0.05,
    "random_resized_crop": False,
    "randaugment_magnitude": 0.5,
    "switch_probability": 0.5,
    "random_erasing": 0.0,
}
IMAGE_MODEL_FIELDS = (
    "image_size",
    "patch_size",
    "num_layers",
    "hidden_dim",
    "ffn_dim",
    "attention_dim",
    "spatial",
    "drop_path_rate",
    "dropout",
)
AUGMENT_FIELDS = (
    "flip",
    "crop_padding",
    "random_resized_crop",
    "translate",
    "randaugment_ops",
    "randaugment_magnitude",
    "mixup",
    "cutmix",
    "switch_probability",
    "random_erasing",
)


@dataclasses.dataclass
class ImageClassificationConfig(TrainingConfig):
    """An image classification run; `None` fields take the dataset's values.

    `resolved()` fills every field left `None` from the dataset's row of
    `IMAGE_DATASET_DEFAULTS` (the digits quick-start, the paper's CIFAR and
    ImageNet recipes, CIFAR's for a folder), then `IMAGE_BASE_DEFAULTS`.

    Attributes (besides `TrainingConfig`'s):
        dataset: str. `"digits"`, `"cifar10"`, `"cifar100"`,
            `"imagenet2012"`, `"folder:PATH"` or `"tfds:NAME"`.
        data_dir: str or `None`. Local files, or the tfds data folder.
        label_offset: int or `None`. Subtracted from TFRecord labels.
        preset: str or `None`. An image preset of `keras_gmlp.PRESETS`.
        architecture: str. `"gmlp"`, or `"vit"`: keras-hub's ViT of the
            gMLP's parameter count, at the gMLP's width, image and patch
            size, with its own default learning rate
            (`keras_gmlp.baselines.LEARNING_RATES`); `"deit"` is
            the same ViT (DeiT is ViT with the recipe applied here).
        image_size, patch_size, num_layers, hidden_dim, ffn_dim,
            attention_dim, spatial, drop_path_rate, dropout: overrides of
            the preset's (or the dataset's) model configuration.
        label_smoothing: float. Of the loss.
        flip, crop_padding, random_resized_crop, translate,
            randaugment_ops, randaugment_magnitude, mixup, cutmix,
            switch_probability, random_erasing: the augmentation
            (`keras_gmlp.data.augment.AugmentConfig`).
        export: bool. Whether to write the SavedModel.
        plots: bool. Whether to draw the curves and spatial filters.
    """

    epochs: int = None
    per_replica_batch_size: int = None
    learning_rate: float = None
    warmup: float = None
    output_dir: str = "runs/latest"
    dataset: str = "digits"
    data_dir: str = None
    label_offset: int = None
    preset: str = None
    architecture: str = "gmlp"
    image_size: int = None
    patch_size: int = None
    num_layers: int = None
    hidden_dim: int = None
    ffn_dim: int = None
    attention_dim: int = None
    spatial: str = None
    drop_path_rate: float = None
    dropout: float = None
    label_smoothing: float = None
    flip: bool = None
    crop_padding: int = None
    random_resized_crop: bool = None
    translate: float = None
    randaugment_ops: int = None
    randaugment_magnitude: float = None
    mixup: float = None
    cutmix: float = None
    switch_probability: float = None
    random_erasing: float = None
    export: bool = True
    plots: bool = True

    def __post_init__(self):
        super().__post_init__()
        _check_choice(
            "architecture", self.architecture, ("gmlp", "vit", "deit")
        )

    def dataset_family(self):
        """`"digits"`, `"cifar"`, `"folder"` (`folder:PATH` and
        `tfds:NAME`) or `"imagenet"` (`imagenet2012`)."""
        if self.dataset == "digits":
            return "digits"
        if self.dataset.startswith("cifar"):
            return "cifar"
        if self.dataset.startswith(("folder:", "tfds:")):
            return "folder"
        return "imagenet"

    def resolved(self):
        """A copy with the unset fields filled from the dataset's defaults.

        The dataset's model sizes apply only when no preset is chosen.
        """
        return dataclasses.replace(self, **self.defaults_taken())

    def defaults_taken(self):
        """The fields `resolved()` fills: a dict of field to default."""
        defaults = dict(IMAGE_DATASET_DEFAULTS[self.dataset_family()])
        model_defaults = defaults.pop("model", {})
        preset = self.preset or defaults.pop("preset", None)
        defaults.pop("preset", None)
        values = {"preset": preset}
        if preset is None:
            values.update(model_defaults)
        values.update(IMAGE_BASE_DEFAULTS)
        values.update(defaults)
        return {
            key: value
            for key, value in values.items()
            if getattr(self, key) is None
        }

    def model_overrides(self):
        """The builder's keywords given by the config (not `None`)."""
        return {
            key: getattr(self, key)
            for key in IMAGE_MODEL_FIELDS
            if getattr(self, key) is not None
        }

    def augment_config(self):
        """The `keras_gmlp.data.augment.AugmentConfig` of a resolved config."""
        from keras_gmlp.data.augment import AugmentConfig

        return AugmentConfig(**{k: getattr(self, k) for k in AUGMENT_FIELDS})


SPATIAL_UNITS = ("split", "multiplicative", "additive", "linear")
# `keras_gmlp.baselines.ARCHITECTURES` of both objectives.
TEXT_ARCHITECTURES = (
    "gmlp",
    "transformer",
    "bert",
    "roformer_v2",
    "deberta_v3",
    "fnet",
    "gpt2",
)


@dataclasses.dataclass
class PretrainingConfig(TrainingConfig):
    """Masked-LM (or causal-LM) pretraining of gMLP, aMLP or a Transformer.

    Attributes (besides `TrainingConfig`'s):
        learning_rate: float or `None`. `None`: the architecture's default
            (`keras_gmlp.baselines.LEARNING_RATES`).
        text_files: str or `None`. Glob(s) of plain-text files,
            comma-separated.
        tfds_name: str or `None`. A tensorflow-datasets text dataset.
        tfds_split: str. Its split.
        text_key: str or `None`. Its text feature (found when `None`).
        data_dir: str or `None`. The tfds data folder.
        validation_files: str or `None`. Held-out files; else a hashed
            `validation_fraction` of the records.
        validation_fraction: float.
        record: str. `"line"` or `"paragraph"`.
        decode_errors: str. `"replace"` or `"skip"` records with bytes
            that are not UTF-8.
        shuffle_buffer: int. Packed sequences shuffled together.
        vocabulary: str or `None`. A WordPiece vocabulary file.
        vocabulary_size: int or `None`. Size of a vocabulary learnt from
            the corpus (`None`: the preset's).
        tokenizer_records: int. Records the vocabulary is learnt from.
        cased: bool. Whether the text keeps its case.
        objective: str. `"mlm"` or `"causal"`.
        architecture: str. `"gmlp"`, or a keras-hub model of the gMLP's
            parameters: `"bert"`, `"roformer_v2"`, `"deberta_v3"`, `"fnet"`
            (masked LM), `"gpt2"` (causal LM); `"transformer"` is BERT
            (GPT-2 for `"causal"`).
        preset: str. A text preset.
        sequence_length: int. Tokens per sequence (and the model's).
        num_layers, hidden_dim, ffn_dim, attention_dim, spatial,
            drop_path_rate: overrides of the preset; `attention_dim` 0 for
            none (gMLP).
        spatial_unit: str or `None`. The paper's ablation (Table 3):
            `"split"` (the SGU), `"multiplicative"`, `"additive"`,
            `"linear"`.
        transformer_layers: int or `None`. Transformer layers (`None`:
            matched to the gMLP's parameters).
        transformer_heads: int or `None`. Transformer attention heads.
        mask_rate: float. Share of tokens selected for prediction.
        max_predictions: int or `None`. Masked positions per sequence.
        validation_batches: int. Held-out batches evaluated.
        unigram_tokens: int. Training tokens counted for the unigram
            baseline; 0 skips it.
    """

    epochs: int = 10
    steps_per_epoch: int = 200
    per_replica_batch_size: int = 32
    learning_rate: float = None
    weight_decay: float = 0.01
    warmup: float = 0.05
    output_dir: str = "runs/masked_lm"
    text_files: str = None
    tfds_name: str = None
    tfds_split: str = "train"
    text_key: str = None
    data_dir: str = None
    validation_files: str = None
    validation_fraction: float = 0.02
    record: str = "line"
    decode_errors: str = "replace"
    shuffle_buffer: int = 2048
    vocabulary: str = None
    vocabulary_size: int = None
    tokenizer_records: int = 200_000
    cased: bool = False
    objective: str = "mlm"
    architecture: str = "gmlp"
    preset: str = "gmlp_tiny"
    sequence_length: int = 128
    num_layers: int = None
    hidden_dim: int = None
    ffn_dim: int = None
    attention_dim: int = None
    spatial: str = None
    spatial_unit: str = None
    drop_path_rate: float = None
    transformer_layers: int = None
    transformer_heads: int = None
    mask_rate: float = 0.15
    max_predictions: int = None
    validation_batches: int = 50
    unigram_tokens: int = 5_000_000

    def __post_init__(self):
        super().__post_init__()
        _check_choice("objective", self.objective, ("mlm", "causal"))
        _check_choice("architecture", self.architecture, TEXT_ARCHITECTURES)
        if self.spatial_unit is not None:
            _check_choice("spatial_unit", self.spatial_unit, SPATIAL_UNITS)

    def model_config(self, vocabulary_size):
        """The `keras_gmlp.models.masked_lm` keywords the config gives."""
        config = {"preset": self.preset, "vocabulary_size": vocabulary_size}
        config["sequence_length"] = self.sequence_length
        overrides = {
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "ffn_dim": self.ffn_dim,
            "spatial": self.spatial,
            "gating": self.spatial_unit,
            "drop_path_rate": self.drop_path_rate,
        }
        config.update({k: v for k, v in overrides.items() if v is not None})
        if self.attention_dim is not None:
            config["attention_dim"] = self.attention_dim or None
        return config


@dataclasses.dataclass
class TextClassificationConfig(TrainingConfig):
    """Fine-tuning a pretrained gMLP (or training one) to classify text.

    Attributes (besides `TrainingConfig`'s):
        tfds_name: str or `None`. E.g. `"glue/sst2"`, `"imdb_reviews"`.
        data_dir: str or `None`. The tfds data folder.
        train_split: str. The tfds training split.
        validation_split: str or `None`. The tfds split evaluated.
        train_file: str or `None`. CSV/TSV file of training rows.
        validation_file: str or `None`. CSV/TSV file evaluated.
        text_column: str or `None`. Text column or tfds feature.
        text_b_column: str or `None`. Second text of sentence pairs.
        label_column: str.
        shuffle_buffer: int. Training rows shuffled together.
        pretrained: str or `None`. Folder of a pretraining run whose
            vocabulary and encoder weights are used.
        preset: str. A text preset, for a model from scratch.
        vocabulary: str or `None`. Vocabulary file (from scratch).
        vocabulary_size: int or `None`. Size of a vocabulary learnt from
            the training texts (`None`: 8192).
        sequence_length: int. Tokens per example.
        num_layers, hidden_dim, ffn_dim, attention_dim: overrides of the
            preset.
        dropout: float. Dropout before the head.
        cased: bool. Whether the text keeps its case (a pretrained run's
            own setting wins).
    """

    epochs: int = 3
    per_replica_batch_size: int = 32
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    warmup: float = 0.1
    output_dir: str = "runs/text_classification"
    tfds_name: str = None
    data_dir: str = None
    train_split: str = "train"
    validation_split: str = None
    train_file: str = None
    validation_file: str = None
    text_column: str = None
    text_b_column: str = None
    label_column: str = "label"
    shuffle_buffer: int = 10_000
    pretrained: str = None
    preset: str = "gmlp_tiny"
    vocabulary: str = None
    vocabulary_size: int = None
    sequence_length: int = 128
    num_layers: int = None
    hidden_dim: int = None
    ffn_dim: int = None
    attention_dim: int = None
    dropout: float = 0.1
    cased: bool = False

    def model_overrides(self):
        """The size keywords the config gives (not `None`)."""
        sizes = {
            "num_layers": self.num_layers,
            "hidden_dim": self.hidden_dim,
            "ffn_dim": self.ffn_dim,
            "attention_dim": self.attention_dim,
        }
        return {k: v for k, v in sizes.items() if v is not None}


def _check_choice(name, value, choices):
    if value not in choices:
        raise ValueError(
            f"Received {name}={value!r}; expected one of {list(choices)}."
        )
