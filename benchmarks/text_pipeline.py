"""Tokens/s of the masked-LM input pipeline vs. tokens/s of a training step.

The question: does the tf.data pipeline (streaming, WordPiece, packing,
masking) keep up with training, or does training wait for data? Both are
measured in the same process on the same corpus, and the ratio
pipeline / training is reported: above 1 the pipeline is not the
bottleneck (and it runs in parallel with training, prefetched).

Usage:

```
KERAS_BACKEND=jax python benchmarks/text_pipeline.py \\
    --text-files "/usr/share/doc/python3.11/html/_sources/**/*.txt"
```

Without `--text-files` a corpus of English-like sentences is generated.
Results go to `benchmarks/results/text_pipeline_<backend>.json`.
"""

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time

import keras

from keras_gmlp.data.corpus import TextCorpus
from keras_gmlp.data.lm_batches import masked_lm_dataset
from keras_gmlp.data.vocabulary import make_tokenizer
from keras_gmlp.data.vocabulary import train_vocabulary
from keras_gmlp.models import GMLPMaskedLM
from keras_gmlp.training.text_metrics import language_model_loss
from keras_gmlp.training.text_metrics import language_model_metrics

WORDS = (
    "the a of to in is that for it as with was on be by this are from at "
    "or an have not which but one all they their has been were can more "
    "model data layer token gate spatial unit training sequence vector "
    "network attention linear block weight bias norm input output batch"
).split()


def write_corpus(path, lines, seed=0):
    """Writes `lines` random sentences to `path`."""
    rng = random.Random(seed)
    with open(path, "w") as file:
        for _ in range(lines):
            words = rng.choices(WORDS, k=rng.randint(5, 40))
            file.write(" ".join(words) + ".\n")


def pipeline_tokens_per_second(dataset, batches, sequence_length):
    """Iterates the pipeline alone; returns tokens/s (after one batch)."""
    iterator = iter(dataset)
    next(iterator)
    started = time.perf_counter()
    for _ in range(batches):
        next(iterator)
    elapsed = time.perf_counter() - started
    tokens = batches * next(iterator)[0]["token_ids"].shape[0]
    return tokens * sequence_length / elapsed


def training_tokens_per_second(model, batch, steps, sequence_length):
    """Repeats a training step on one batch; returns tokens/s."""
    inputs, labels, weights = batch
    model.train_on_batch(inputs, labels, sample_weight=weights)
    started = time.perf_counter()
    for _ in range(steps):
        model.train_on_batch(inputs, labels, sample_weight=weights)
    elapsed = time.perf_counter() - started
    return steps * labels.shape[0] * sequence_length / elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text-files")
    parser.add_argument("--record", default="paragraph")
    parser.add_argument("--preset", default="gmlp_tiny")
    parser.add_argument("--vocabulary-size", type=int, default=8192)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--pipeline-batches", type=int, default=100)
    parser.add_argument("--training-steps", type=int, default=20)
    parser.add_argument("--output-dir", default="benchmarks/results")
    args = parser.parse_args(argv)

    workdir = tempfile.mkdtemp()
    files = args.text_files
    if files is None:
        files = os.path.join(workdir, "corpus.txt")
        write_corpus(files, 20_000)
    corpus = TextCorpus(files=files, record=args.record)
    vocabulary = train_vocabulary(
        corpus.records("train"), args.vocabulary_size, max_records=20_000
    )
    tokenizer = make_tokenizer(vocabulary)
    dataset = masked_lm_dataset(
        corpus.dataset("train", repeat=True),
        tokenizer,
        args.sequence_length,
        args.batch_size,
        shuffle_buffer=256,
    )
    pipeline = pipeline_tokens_per_second(
        dataset, args.pipeline_batches, args.sequence_length
    )
    training_model = GMLPMaskedLM.from_preset(
        args.preset,
        vocabulary_size=len(vocabulary),
        sequence_length=args.sequence_length,
    )
    training_model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=language_model_loss(),
        weighted_metrics=language_model_metrics(),
    )
    batch = next(iter(dataset))
    batch = (
        {k: v.numpy() for k, v in batch[0].items()},
        batch[1].numpy(),
        batch[2].numpy(),
    )
    training = training_tokens_per_second(
        training_model, batch, args.training_steps, args.sequence_length
    )
    results = {
        "backend": keras.config.backend(),
        "machine": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "corpus": args.text_files or "generated",
        "preset": args.preset,
        "vocabulary_size": len(vocabulary),
        "sequence_length": args.sequence_length,
        "batch_size": args.batch_size,
        "pipeline_tokens_per_second": round(pipeline),
        "training_step_tokens_per_second": round(training),
        "pipeline_over_training": round(pipeline / training, 2),
        "command": " ".join(sys.argv),
    }
    os.makedirs(args.output_dir, exist_ok=True)
    path = os.path.join(
        args.output_dir, f"text_pipeline_{keras.config.backend()}.json"
    )
    with open(path, "w") as file:
        json.dump(results, file, indent=1)
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
