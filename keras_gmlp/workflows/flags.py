"""The training jobs' flags, declared without importing a backend.

`keras-gmlp --help` and each sub-command's `--help` build their parsers
from these functions and `keras_gmlp.training.arguments` alone, so they
answer without importing Keras, TensorFlow, JAX or torch. Each job's
module (`image_classification`, `pretraining`, `text_classification`)
takes its `DESCRIPTION` and `add_arguments` from here.
"""

import argparse

from keras_gmlp.training import arguments
from keras_gmlp.training.run_config import SPATIAL_UNITS
from keras_gmlp.training.run_config import TEXT_ARCHITECTURES
from keras_gmlp.training.run_config import ImageClassificationConfig
from keras_gmlp.training.run_config import PretrainingConfig
from keras_gmlp.training.run_config import TextClassificationConfig

IMAGE_CLASSIFICATION_DESCRIPTION = (
    "Train a gMLP image classifier (Liu et al. 2021, arXiv 2105.08050)."
)
PRETRAINING_DESCRIPTION = (
    "Masked-LM (or causal-LM) pretraining of gMLP, aMLP or a Transformer."
)
TEXT_CLASSIFICATION_DESCRIPTION = (
    "Fine-tune a pretrained gMLP, or train one, to classify text."
)
DATASET_DEFAULT = "default: the dataset's"
# The vocabulary learnt from the training texts of a text classifier
# trained from scratch.
DEFAULT_VOCABULARY_SIZE = 8192


def add_image_classification_arguments(parser):
    """Adds the image classification flags (shared training flags
    included) to `parser`; returns it."""
    arguments.add_training_arguments(parser)
    positive_int = arguments.positive_int
    probability = arguments.probability
    data = parser.add_argument_group("data")
    data.add_argument(
        "--dataset",
        help="digits | cifar10 | cifar100 | imagenet2012 | folder:PATH (class "
        "sub-folders of images) | tfds:NAME (a tensorflow-datasets image "
        "dataset); docs/training.md, Datasets (default: digits).",
    )
    data.add_argument(
        "--data-dir",
        help="Local files in their native format, or the tensorflow-"
        "datasets data folder.",
    )
    data.add_argument(
        "--label-offset",
        type=int,
        help="Subtracted from TFRecord labels (default 1 for ImageNet).",
    )
    model = parser.add_argument_group(
        "model (override the preset; unset: the dataset's)"
    )
    model.add_argument(
        "--preset", help="An image preset of keras_gmlp.PRESETS."
    )
    model.add_argument(
        "--architecture",
        choices=("gmlp", "vit", "deit"),
        help="gmlp, or keras-hub's ViT with the parameters of that gMLP, "
        "at its width, image and patch size; deit is the same ViT (DeiT is "
        "ViT trained with the recipe this pipeline applies).",
    )
    model.add_argument("--image-size", type=positive_int)
    model.add_argument("--patch-size", type=positive_int)
    model.add_argument("--num-layers", type=positive_int)
    model.add_argument("--hidden-dim", type=positive_int)
    model.add_argument("--ffn-dim", type=positive_int)
    model.add_argument(
        "--attention-dim", type=positive_int, help="Tiny attention (aMLP)."
    )
    model.add_argument("--spatial", choices=("dense", "toeplitz"))
    model.add_argument("--drop-path-rate", type=probability)
    model.add_argument("--dropout", type=probability)
    augment = parser.add_argument_group(
        "augmentation and loss (unset: the dataset's)"
    )
    augment.add_argument("--label-smoothing", type=probability)
    augment.add_argument(
        "--flip",
        action=argparse.BooleanOptionalAction,
        help=f"Random horizontal flips ({DATASET_DEFAULT}).",
    )
    augment.add_argument(
        "--crop-padding", type=int, help="Padding of CIFAR-style crops."
    )
    augment.add_argument(
        "--random-resized-crop",
        action=argparse.BooleanOptionalAction,
        help=f"Inception-style crops ({DATASET_DEFAULT}).",
    )
    augment.add_argument("--translate", type=probability)
    augment.add_argument("--randaugment-ops", type=int)
    augment.add_argument("--randaugment-magnitude", type=probability)
    augment.add_argument("--mixup", type=arguments.non_negative_float)
    augment.add_argument("--cutmix", type=arguments.non_negative_float)
    augment.add_argument("--switch-probability", type=probability)
    augment.add_argument("--random-erasing", type=probability)
    output = parser.add_argument_group("outputs")
    output.add_argument(
        "--export",
        action=argparse.BooleanOptionalAction,
        help="Write saved_model/ (uint8 images -> probabilities).",
    )
    output.add_argument(
        "--plots",
        action=argparse.BooleanOptionalAction,
        help="Draw curves.png and spatial_filters.png.",
    )
    arguments.set_config_defaults(parser, ImageClassificationConfig)
    return parser


def add_pretraining_arguments(parser):
    """Adds the pretraining flags (shared training flags included) to
    `parser`; returns it."""
    arguments.add_training_arguments(parser)
    positive_int = arguments.positive_int
    probability = arguments.probability
    data = parser.add_argument_group("corpus")
    data.add_argument(
        "--text-files",
        help="Glob(s) of plain-text files, comma-separated (streamed).",
    )
    data.add_argument("--tfds-name", help="A tensorflow-datasets dataset.")
    data.add_argument("--tfds-split")
    data.add_argument("--text-key", help="tfds text feature (found if unset).")
    data.add_argument("--data-dir", help="tensorflow-datasets data folder.")
    data.add_argument(
        "--validation-files", help="Held-out files (else a hashed share)."
    )
    data.add_argument("--validation-fraction", type=probability)
    data.add_argument(
        "--record",
        choices=("line", "paragraph"),
        help="A record per line, or per blank-line separated paragraph.",
    )
    data.add_argument(
        "--decode-errors",
        choices=("replace", "skip"),
        help="Records with bytes that are not UTF-8: replace the bytes "
        "(U+FFFD) or skip the record; counted either way.",
    )
    data.add_argument("--shuffle-buffer", type=int)
    tokenizer = parser.add_argument_group("tokenizer")
    tokenizer.add_argument(
        "--vocabulary", help="A WordPiece vocabulary file ([PAD] first)."
    )
    tokenizer.add_argument(
        "--vocabulary-size",
        type=positive_int,
        help="Size of a vocabulary learnt from the corpus (default: the "
        "preset's).",
    )
    tokenizer.add_argument(
        "--tokenizer-records",
        type=positive_int,
        help="Training records the vocabulary is learnt from.",
    )
    tokenizer.add_argument(
        "--cased",
        action=argparse.BooleanOptionalAction,
        help="Keep the case of the text (else lowercase it).",
    )
    model = parser.add_argument_group("model")
    model.add_argument("--objective", choices=("mlm", "causal"))
    model.add_argument(
        "--architecture",
        choices=TEXT_ARCHITECTURES,
        help="gmlp, or a keras-hub model of the gMLP's parameter count: "
        "bert (alias transformer), roformer_v2, deberta_v3 or fnet for "
        "--objective mlm; gpt2 (alias transformer) for --objective causal.",
    )
    model.add_argument("--preset", help="A text preset (keras-gmlp info).")
    model.add_argument("--sequence-length", type=positive_int)
    model.add_argument("--num-layers", type=positive_int)
    model.add_argument("--hidden-dim", type=positive_int)
    model.add_argument("--ffn-dim", type=positive_int)
    model.add_argument(
        "--attention-dim",
        type=int,
        help="Tiny attention size (aMLP); 0 for none (gMLP).",
    )
    model.add_argument("--spatial", choices=("dense", "toeplitz"))
    model.add_argument(
        "--spatial-unit",
        choices=SPATIAL_UNITS,
        help="The paper's ablation (Table 3); 'split' is the SGU.",
    )
    model.add_argument("--drop-path-rate", type=probability)
    model.add_argument(
        "--transformer-layers",
        type=positive_int,
        help="Layers of a baseline (default: searched with its feed-forward "
        "size to match the gMLP's parameters).",
    )
    model.add_argument("--transformer-heads", type=positive_int)
    mlm = parser.add_argument_group("masking and evaluation")
    mlm.add_argument("--mask-rate", type=probability)
    mlm.add_argument("--max-predictions", type=positive_int)
    mlm.add_argument(
        "--validation-batches",
        type=positive_int,
        help="Held-out batches evaluated (masked once, then cached).",
    )
    mlm.add_argument(
        "--unigram-tokens",
        type=int,
        help="Training tokens counted for the unigram baseline; 0 skips it.",
    )
    arguments.set_config_defaults(parser, PretrainingConfig)
    return parser


def add_text_classification_arguments(parser):
    """Adds the text classification flags (shared training flags
    included) to `parser`; returns it."""
    from keras_gmlp.data.labelled_text import VALIDATION_SPLITS

    arguments.add_training_arguments(parser)
    positive_int = arguments.positive_int
    data = parser.add_argument_group("data")
    data.add_argument("--tfds-name", help="e.g. glue/sst2, imdb_reviews.")
    data.add_argument("--data-dir", help="tensorflow-datasets data folder.")
    data.add_argument("--train-split")
    data.add_argument(
        "--validation-split",
        help=f"tfds split to evaluate (default: the first of "
        f"{VALIDATION_SPLITS} the dataset has).",
    )
    data.add_argument("--train-file", help="CSV/TSV file of training rows.")
    data.add_argument("--validation-file", help="CSV/TSV file to evaluate.")
    data.add_argument(
        "--text-column", help="Text column or tfds feature (found if unset)."
    )
    data.add_argument(
        "--text-b-column", help="Second text of sentence pairs (optional)."
    )
    data.add_argument("--label-column")
    data.add_argument(
        "--shuffle-buffer",
        type=positive_int,
        help="Training rows shuffled together.",
    )
    model = parser.add_argument_group("model")
    model.add_argument(
        "--pretrained",
        help="Folder of a gMLP pretraining run (keras-gmlp pretrain), or a "
        "text preset folder: its tokenizer and backbone weights are used.",
    )
    model.add_argument(
        "--preset", help="A text preset, for a model from scratch."
    )
    model.add_argument("--vocabulary", help="Vocabulary file (from scratch).")
    model.add_argument(
        "--vocabulary-size",
        type=positive_int,
        help="Size of a vocabulary learnt from the training texts "
        f"(default {DEFAULT_VOCABULARY_SIZE}).",
    )
    model.add_argument("--sequence-length", type=positive_int)
    model.add_argument("--num-layers", type=positive_int)
    model.add_argument("--hidden-dim", type=positive_int)
    model.add_argument("--ffn-dim", type=positive_int)
    model.add_argument("--attention-dim", type=positive_int)
    model.add_argument("--dropout", type=arguments.probability)
    model.add_argument(
        "--cased",
        action=argparse.BooleanOptionalAction,
        help="Keep the case of the text (a pretrained run's setting wins).",
    )
    arguments.set_config_defaults(parser, TextClassificationConfig)
    return parser
