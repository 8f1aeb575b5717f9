"""Pretrains a gMLP/aMLP (or a matched Transformer) language model on text.

Streams a corpus (plain-text files or a tensorflow-datasets dataset),
learns or loads a WordPiece vocabulary, packs `[CLS] ... [SEP]` sequences,
masks them inside tf.data (15 %, 80/10/10) and trains with AdamW, warmup
and linear decay. Evaluates masked-token accuracy and perplexity on a
held-out split that never reaches training. Killed and started again with
the same command, it resumes from its last completed epoch.

Usage:

```
python recipes/masked_lm.py --text-files "corpus/*.txt" \\
    --preset gmlp_tiny --epochs 10 --steps-per-epoch 200 \\
    --output-dir runs/gmlp_tiny
python recipes/masked_lm.py --output-dir runs/gmlp_tiny \\
    --predict "the [MASK] sat on the mat"
```

`--objective causal` trains a causal (next-token) gMLP instead;
`--architecture transformer` trains keras-hub's BERT (GPT-2 for
`--objective causal`) with about the same number of parameters through the
same pipeline; `--spatial-unit` selects the spatial unit of the paper's
ablation (Table 3).
"""

import functools
import json
import os
import sys
import time

import keras
import numpy as np

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.masked_lm import TEXT_DEFAULTS
from keras_gmlp.training import adamw
from keras_gmlp.training import common_parser
from keras_gmlp.training import configure_run
from keras_gmlp.training import fit
from keras_gmlp.training import global_batch_size
from keras_gmlp.training import jit_compile
from keras_gmlp.training import run_distribution
from keras_gmlp.training import scaled_learning_rate
from keras_gmlp.training import warmup_linear
from keras_gmlp.training import warmup_steps
from keras_gmlp.training import write_results
from keras_gmlp.training.arguments import positive_int
from keras_gmlp.training.arguments import probability
from keras_gmlp.training.callbacks import BEST_CHECKPOINT
from keras_gmlp.training.callbacks import LAST_CHECKPOINT
from keras_gmlp.training.text_metrics import language_model_loss
from keras_gmlp.training.text_metrics import language_model_metrics
from keras_gmlp.training.text_models import causal_lm_model
from keras_gmlp.training.text_models import gmlp_masked_lm_models
from keras_gmlp.training.text_models import matched_transformer_layers
from keras_gmlp.training.text_models import transformer_causal_lm_model
from keras_gmlp.training.text_models import transformer_masked_lm_models

VOCABULARY_FILE = "vocabulary.txt"
RUN_CONFIG_FILE = "run_config.json"
SPATIAL_UNITS = ("split", "multiplicative", "additive", "linear")


def build_parser():
    """The recipe's flags: the shared ones and the text ones."""
    parser = common_parser(
        "Masked-LM (or causal-LM) pretraining of gMLP, aMLP or a Transformer.",
        epochs=10,
        steps_per_epoch=200,
        per_replica_batch_size=32,
        learning_rate=1e-3,
        weight_decay=0.01,
        warmup=0.05,
        output_dir="runs/masked_lm",
    )
    data = parser.add_argument_group("corpus")
    data.add_argument(
        "--text-files",
        help="Glob(s) of plain-text files, comma-separated (streamed).",
    )
    data.add_argument("--tfds-name", help="A tensorflow-datasets dataset.")
    data.add_argument("--tfds-split", default="train")
    data.add_argument("--text-key", help="tfds text feature (found if unset).")
    data.add_argument("--data-dir", help="tensorflow-datasets data folder.")
    data.add_argument(
        "--validation-files", help="Held-out files (else a hashed share)."
    )
    data.add_argument("--validation-fraction", type=probability, default=0.02)
    data.add_argument(
        "--record",
        choices=("line", "paragraph"),
        default="line",
        help="A record per line, or per blank-line separated paragraph.",
    )
    data.add_argument(
        "--decode-errors",
        choices=("replace", "skip"),
        default="replace",
        help="Records with bytes that are not UTF-8: replace the bytes "
        "(U+FFFD) or skip the record; counted either way.",
    )
    data.add_argument("--shuffle-buffer", type=int, default=2048)
    tokenizer = parser.add_argument_group("tokenizer")
    tokenizer.add_argument(
        "--vocabulary", help="A WordPiece vocabulary file ([PAD] first)."
    )
    tokenizer.add_argument(
        "--vocabulary-size",
        type=positive_int,
        default=None,
        help="Size of a vocabulary learnt from the corpus (default: the "
        "preset's).",
    )
    tokenizer.add_argument(
        "--tokenizer-records",
        type=positive_int,
        default=200_000,
        help="Training records the vocabulary is learnt from.",
    )
    tokenizer.add_argument(
        "--cased", action="store_true", help="Do not lowercase the text."
    )
    model = parser.add_argument_group("model")
    model.add_argument("--objective", choices=("mlm", "causal"), default="mlm")
    model.add_argument(
        "--architecture", choices=("gmlp", "transformer"), default="gmlp"
    )
    model.add_argument("--preset", default="gmlp_tiny")
    model.add_argument("--sequence-length", type=positive_int, default=128)
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
        help="Transformer layers (default: matched to the gMLP's size).",
    )
    model.add_argument("--transformer-heads", type=positive_int)
    mlm = parser.add_argument_group("masking and evaluation")
    mlm.add_argument("--mask-rate", type=probability, default=0.15)
    mlm.add_argument("--max-predictions", type=positive_int)
    mlm.add_argument(
        "--validation-batches",
        type=positive_int,
        default=50,
        help="Held-out batches evaluated (masked once, then cached).",
    )
    mlm.add_argument(
        "--unigram-tokens",
        type=int,
        default=5_000_000,
        help="Training tokens counted for the unigram baseline; 0 skips it.",
    )
    demo = parser.add_argument_group("fill-in-the-blank demo")
    demo.add_argument(
        "--predict",
        help="Print the top-k fillers of each [MASK] of this text, from the "
        "run in --output-dir, and exit.",
    )
    demo.add_argument("--top-k", type=positive_int, default=5)
    return parser


def model_config(args, vocabulary_size):
    """The `masked_lm` configuration the flags describe."""
    config = {"preset": args.preset, "vocabulary_size": vocabulary_size}
    config["sequence_length"] = args.sequence_length
    flags = {
        "num_layers": args.num_layers,
        "hidden_dim": args.hidden_dim,
        "ffn_dim": args.ffn_dim,
        "spatial": args.spatial,
        "gating": args.spatial_unit,
        "drop_path_rate": args.drop_path_rate,
    }
    config.update({k: v for k, v in flags.items() if v is not None})
    if args.attention_dim is not None:
        config["attention_dim"] = args.attention_dim or None
    return config


def prepare_vocabulary(args, corpus):
    """The run's vocabulary: the saved one, `--vocabulary`, or learnt.

    It is written to the run's folder, so a resumed run (and the
    fine-tuning recipe) reuses exactly the same token ids.
    """
    from keras_gmlp.data import text

    path = os.path.join(args.output_dir, VOCABULARY_FILE)
    if os.path.exists(path):
        print(f"Reusing the run's vocabulary {path}.")
        return text.load_vocabulary(path)
    if args.vocabulary:
        vocabulary = text.load_vocabulary(args.vocabulary)
    else:
        size = (
            args.vocabulary_size
            or resolve_config("text", TEXT_DEFAULTS, args.preset)[
                "vocabulary_size"
            ]
        )
        started = time.perf_counter()
        vocabulary = text.train_vocabulary(
            corpus.records("train"),
            size,
            lowercase=not args.cased,
            max_records=args.tokenizer_records,
        )
        print(
            f"Learnt a WordPiece vocabulary of {len(vocabulary)} tokens in "
            f"{time.perf_counter() - started:.1f} s."
        )
    os.makedirs(args.output_dir, exist_ok=True)
    text.save_vocabulary(vocabulary, path)
    return vocabulary


def make_corpus(args):
    from keras_gmlp.data import text

    if args.text_files is None and args.tfds_name is None:
        raise ValueError(
            "Expected a corpus: --text-files GLOB or --tfds-name NAME."
        )
    corpus = text.TextCorpus(
        files=args.text_files,
        tfds_name=args.tfds_name,
        tfds_split=args.tfds_split,
        text_key=args.text_key,
        data_dir=args.data_dir,
        validation_files=args.validation_files,
        validation_fraction=args.validation_fraction,
        record=args.record,
        decode_errors=args.decode_errors,
    )
    corpus.check()
    return corpus


def make_datasets(args, corpus, tokenizer, batch_size):
    """Training stream (endless) and cached held-out batches.

    The held-out masks are drawn from `--seed` alone, so every run with the
    same seed (gMLP, aMLP, Transformer...) is scored on the same targets.
    """
    from keras_gmlp.data import text

    shape = (tokenizer, args.sequence_length, batch_size)
    if args.objective == "causal":
        batches = text.causal_lm_dataset
        validation = text.fixed_batches(
            batches(corpus.dataset("validation"), *shape),
            args.validation_batches,
        )
    else:
        masking = {
            "mask_rate": args.mask_rate,
            "max_predictions": args.max_predictions,
        }
        batches = functools.partial(text.masked_lm_dataset, **masking)
        validation = text.masked_lm_heldout_batches(
            corpus.dataset("validation"),
            *shape,
            args.validation_batches,
            seed=args.seed,
            **masking,
        )
    train = batches(
        corpus.dataset("train", repeat=True),
        *shape,
        shuffle_buffer=args.shuffle_buffer,
        seed=args.seed,
    )
    return train, validation


def unigram_baseline(args, corpus, tokenizer, validation):
    """Held-out perplexity of the training tokens' unigram frequencies."""
    from keras_gmlp.data import text

    if not args.unigram_tokens:
        return None
    ids = text.special_ids(tokenizer)
    never_targets = [ids[text.PAD], ids[text.CLS]]
    if args.objective == "mlm":
        never_targets.append(ids[text.SEP])
    counts = text.token_counts(
        text.tokenize_records(
            corpus.dataset("train"), tokenizer, ids[text.SEP]
        ),
        tokenizer.vocabulary_size(),
        max_tokens=args.unigram_tokens,
        exclude=never_targets,
    )
    return text.unigram_perplexity(counts, validation.as_numpy_iterator())


def build_models(args, vocabulary_size):
    """`(training_model, saved_model, description)` for the flags."""
    config = model_config(args, vocabulary_size)
    resolved = resolve_config(
        "text",
        TEXT_DEFAULTS,
        config["preset"],
        **{k: v for k, v in config.items() if k != "preset"},
    )
    if args.architecture == "transformer":
        layers, block_params, layer_params = matched_transformer_layers(
            resolved, args.transformer_heads
        )
        layers = args.transformer_layers or layers
        size = {
            "num_layers": layers,
            "hidden_dim": resolved["hidden_dim"],
            "ffn_dim": resolved["ffn_dim"],
            "num_heads": args.transformer_heads,
        }
        if args.objective == "causal":
            training_model = model = transformer_causal_lm_model(
                vocabulary_size, args.sequence_length, **size
            )
        else:
            training_model, model = transformer_masked_lm_models(
                vocabulary_size, args.sequence_length, **size
            )
        description = {
            "architecture": "transformer",
            "transformer_layers": layers,
            "gmlp_block_parameters": block_params,
            "transformer_layer_parameters": layer_params,
        }
    elif args.objective == "causal":
        training_model = model = causal_lm_model(config)
        description = {"architecture": "gmlp", "config": resolved}
    else:
        training_model, model = gmlp_masked_lm_models(config)
        description = {"architecture": "gmlp", "config": resolved}
    description["parameters"] = int(model.count_params())
    return training_model, model, description


def find_checkpoint(output_dir):
    for name in (BEST_CHECKPOINT, LAST_CHECKPOINT):
        path = os.path.join(output_dir, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(
        f"No {BEST_CHECKPOINT} or {LAST_CHECKPOINT} in {output_dir!r}; "
        "expected the --output-dir of a finished masked-LM run."
    )


def predict_masked(output_dir, sentence, top_k=5, cased=False):
    """Top-k fillers of each `[MASK]` of `sentence`, from a saved run.

    Args:
        output_dir: str. The run's folder (vocabulary and checkpoint).
        sentence: str. Text with one or more `[MASK]`.
        top_k: int. Fillers per mask.
        cased: bool. Whether the run's tokenizer is cased.

    Returns:
        A list, one entry per `[MASK]`, of `(token, probability)` pairs.
    """
    from keras_gmlp.data import text

    vocabulary = text.load_vocabulary(os.path.join(output_dir, VOCABULARY_FILE))
    tokenizer = text.make_tokenizer(
        vocabulary, lowercase=not cased, special_tokens_in_strings=True
    )
    ids = text.special_ids(tokenizer)
    tokens = np.asarray(tokenizer.tokenize([sentence])[0]).tolist()
    token_ids = np.array([[ids[text.CLS], *tokens, ids[text.SEP]]], "int32")
    positions = np.flatnonzero(token_ids[0] == ids[text.MASK])
    if not len(positions):
        raise ValueError(
            f"Received {sentence!r}; expected a text with at least one "
            f"{text.MASK}."
        )
    run_config = _run_config(output_dir)
    if run_config.get("objective", "mlm") != "mlm":
        raise ValueError(
            f"The run in {output_dir!r} trained a "
            f"{run_config['objective']!r} model; --predict fills the "
            "[MASK]s of a masked-LM run."
        )
    if run_config.get("architecture") == "transformer":
        import keras_hub  # noqa: F401 (registers keras-hub's classes)
    model = keras.saving.load_model(find_checkpoint(output_dir), compile=False)
    length = run_config.get("sequence_length")
    if length is not None and token_ids.shape[1] > length:
        raise ValueError(
            f"The text is {token_ids.shape[1]} tokens long with [CLS] and "
            f"[SEP]; the model takes at most {length}."
        )
    logits = model.predict(
        {"token_ids": token_ids, "mask_positions": positions[None, :]},
        verbose=0,
    )[0]
    logits = logits.astype("float64")
    probabilities = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities /= probabilities.sum(-1, keepdims=True)
    results = []
    for row in probabilities:
        best = np.argsort(-row)[:top_k]
        results.append([(vocabulary[i], float(row[i])) for i in best])
    return results


def _run_config(output_dir):
    path = os.path.join(output_dir, RUN_CONFIG_FILE)
    if not os.path.exists(path):
        return {}
    with open(path) as file:
        return json.load(file)


def main(argv=None, callbacks=None):
    """Runs the recipe; returns the results dict (or the predictions).

    Args:
        argv: list of str. The command-line flags; defaults to
            `sys.argv[1:]`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.
    """
    args = build_parser().parse_args(argv)
    if args.predict is not None:
        predictions = predict_masked(
            args.output_dir, args.predict, args.top_k, args.cased
        )
        for index, fillers in enumerate(predictions):
            shown = ", ".join(f"{t} ({p:.3f})" for t, p in fillers)
            print(f"[MASK] {index + 1}: {shown}")
        return predictions
    from keras_gmlp.data import text

    # The strategy comes first: TensorFlow's multi-worker set-up and
    # logical devices must precede anything TensorFlow runs.
    distribution = run_distribution(args)
    configure_run(args)
    corpus = make_corpus(args)
    vocabulary = prepare_vocabulary(args, corpus)
    tokenizer = text.make_tokenizer(vocabulary, lowercase=not args.cased)
    batch_size = global_batch_size(args, distribution.num_replicas)
    total_steps = args.epochs * args.steps_per_epoch
    # The held-out batches are masked before any model draws random numbers.
    train_data, validation_data = make_datasets(
        args, corpus, tokenizer, batch_size
    )
    with distribution.scope():
        training_model, model, description = build_models(args, len(vocabulary))
        peak_learning_rate = scaled_learning_rate(args, batch_size)
        schedule = warmup_linear(
            peak_learning_rate,
            total_steps,
            warmup_steps(args, total_steps),
        )
        training_model.compile(
            optimizer=adamw(
                schedule,
                weight_decay=args.weight_decay,
                global_clipnorm=args.clipnorm,
                epsilon=1e-6,
                model=training_model,
            ),
            loss=language_model_loss(),
            weighted_metrics=language_model_metrics(
                "masked" if args.objective == "mlm" else "next_token"
            ),
            jit_compile=jit_compile(args),
        )
    with open(os.path.join(args.output_dir, RUN_CONFIG_FILE), "w") as file:
        json.dump(
            {
                "objective": args.objective,
                "architecture": args.architecture,
                "sequence_length": args.sequence_length,
                "cased": args.cased,
                "model": description,
            },
            file,
            indent=1,
            default=str,
        )
    print(
        f"{description['architecture']} {args.objective} model with "
        f"{description['parameters']:,} parameters, batch {batch_size}, "
        f"{total_steps} steps on {distribution}."
    )
    history, wall_time = fit(
        training_model,
        train_data,
        validation_data,
        epochs=args.epochs,
        output_dir=args.output_dir,
        distribution=distribution,
        steps_per_epoch=args.steps_per_epoch,
        monitor="val_perplexity",
        mode="min",
        tensorboard=not args.no_tensorboard,
        verbose=args.verbose,
        callbacks=callbacks,
        endless_stream=True,
    )
    saved = (
        "causal_lm.keras" if args.objective == "causal" else "masked_lm.keras"
    )
    if args.architecture == "gmlp" and distribution.is_chief:
        # A fresh, uncompiled model over the same layers: the file then
        # loads with `import keras_gmlp` alone (no optimizer or schedule).
        plain = keras.Model(model.inputs, model.outputs, name=model.name)
        plain.save(os.path.join(args.output_dir, saved))
    accuracy = "val_masked_accuracy"
    if args.objective == "causal":
        accuracy = "val_next_token_accuracy"
    metrics = {
        "val_perplexity": history["val_perplexity"][-1],
        accuracy: history[accuracy][-1],
        "val_loss": history["val_loss"][-1],
        "best_val_perplexity": min(history["val_perplexity"]),
    }
    baseline = unigram_baseline(args, corpus, tokenizer, validation_data)
    if baseline is not None:
        metrics["val_unigram_perplexity"] = baseline
    tokens = total_steps * batch_size * args.sequence_length
    results = write_results(
        args.output_dir,
        args,
        history,
        metrics,
        wall_time,
        distribution=distribution,
        counts=corpus.stats.as_dict(),
        extra={
            "steps": total_steps,
            "global_batch_size": batch_size,
            "peak_learning_rate": peak_learning_rate,
            "training_tokens": tokens,
            "tokens_per_second": tokens / wall_time,
            "vocabulary_size": len(vocabulary),
            "model": description,
        },
    )
    print(json.dumps(metrics, indent=1))
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
