"""Language-model pretraining: flags -> config -> corpus -> task -> fit.

`keras-gmlp pretrain` (and `recipes/masked_lm.py`) run `run(config)`: a
corpus streamed from text files or tfds (`keras_gmlp.data.corpus`), a
WordPiece vocabulary learnt or loaded into a `GMLPTokenizer`
(`keras_gmlp.data.vocabulary`), packed `[CLS] ... [SEP]` sequences masked
inside tf.data by the masked LM's own preprocessor
(`GMLPMaskedLMPreprocessor.mask_packed`: 15 %, 80/10/10) or shifted for
next-token training (`keras_gmlp.data.lm_batches`), a `GMLPMaskedLM` or
`GMLPCausalLM` of the preset and overrides (or a matched keras-hub
Transformer, `keras_gmlp.baselines`), AdamW with warmup and linear
decay, the resumable fit, and held-out perplexity against the unigram
baseline. A gMLP run is saved as a preset folder (`preset/`: the task with
its tokenizer and preprocessor) for `from_preset`. `evaluate_run` scores a
run's model again on the same seeded held-out batches,
`fill_in_the_blank` fills the `[MASK]`s of a sentence and `generate_text`
continues a prompt with a causal run.
"""

import dataclasses
import json
import os
import time

import keras
import numpy as np

from keras_gmlp.models.config import resolve_config
from keras_gmlp.models.gmlp_text.masked_lm import TEXT_DEFAULTS
from keras_gmlp.models.gmlp_text.text_metrics import language_model_loss
from keras_gmlp.models.gmlp_text.text_metrics import language_model_metrics
from keras_gmlp.optimizers.schedules import warmup_linear
from keras_gmlp.training import files
from keras_gmlp.training.callbacks import BEST_CHECKPOINT
from keras_gmlp.training.callbacks import LAST_CHECKPOINT
from keras_gmlp.training.results import write_results
from keras_gmlp.training.run_config import PretrainingConfig
from keras_gmlp.workflows import flags
from keras_gmlp.workflows import predictions
from keras_gmlp.workflows import run_folder
from keras_gmlp.workflows import training_job

CONFIG_CLASS = PretrainingConfig
JOB = "pretraining"
DESCRIPTION = flags.PRETRAINING_DESCRIPTION
VOCABULARY_FILE = "vocabulary.txt"
PRESET_DIR = "preset"
# The plain models of runs of earlier versions.
MASKED_LM_FILE = "masked_lm.keras"
CAUSAL_LM_FILE = "causal_lm.keras"


add_arguments = flags.add_pretraining_arguments
build_parser, config_from_argv = training_job.flag_readers(
    DESCRIPTION, CONFIG_CLASS, add_arguments
)


def make_corpus(config):
    """The `TextCorpus` the config names, checked for both splits."""
    from keras_gmlp.data.corpus import TextCorpus

    if config.text_files is None and config.tfds_name is None:
        raise ValueError(
            "Expected a corpus: --text-files GLOB or --tfds-name NAME."
        )
    corpus = TextCorpus(
        files=config.text_files,
        tfds_name=config.tfds_name,
        tfds_split=config.tfds_split,
        text_key=config.text_key,
        data_dir=config.data_dir,
        validation_files=config.validation_files,
        validation_fraction=config.validation_fraction,
        record=config.record,
        decode_errors=config.decode_errors,
    )
    corpus.check(allow_skipped=config.allow_skipped)
    return corpus


def prepare_vocabulary(config, corpus):
    """The run's vocabulary: the saved one, `vocabulary`, or learnt.

    It is written to the run's folder, so a resumed run (and fine-tuning)
    reuses exactly the same token ids.
    """
    from keras_gmlp.data import vocabulary as vocabularies

    path = os.path.join(config.output_dir, VOCABULARY_FILE)
    if os.path.exists(path):
        print(f"Reusing the run's vocabulary {path}.")
        return vocabularies.load_vocabulary(path)
    if config.vocabulary:
        vocabulary = vocabularies.load_vocabulary(config.vocabulary)
    else:
        size = (
            config.vocabulary_size
            or (
                resolve_config("text", TEXT_DEFAULTS, config.preset)[
                    "vocabulary_size"
                ]
            )
        )
        started = time.perf_counter()
        vocabulary = vocabularies.train_vocabulary(
            corpus.records("train"),
            size,
            lowercase=not config.cased,
            max_records=config.tokenizer_records,
        )
        print(
            f"Learnt a WordPiece vocabulary of {len(vocabulary)} tokens in "
            f"{time.perf_counter() - started:.1f} s."
        )
    os.makedirs(config.output_dir, exist_ok=True)
    vocabularies.save_vocabulary(vocabulary, path)
    return vocabulary


def heldout_batches(config, corpus, tokenizer, batch_size):
    """The cached held-out batches, the same for every run of a seed."""
    from keras_gmlp.data import lm_batches

    shape = (tokenizer, config.sequence_length, batch_size)
    if config.objective == "causal":
        return lm_batches.fixed_batches(
            lm_batches.causal_lm_dataset(corpus.dataset("validation"), *shape),
            config.validation_batches,
        )
    return lm_batches.masked_lm_heldout_batches(
        corpus.dataset("validation"),
        *shape,
        config.validation_batches,
        seed=config.seed,
        mask_rate=config.mask_rate,
        max_predictions=config.max_predictions,
    )


def training_batches(config, corpus, tokenizer, batch_size):
    """The endless training stream of masked (or next-token) batches."""
    from keras_gmlp.data import lm_batches

    shape = (tokenizer, config.sequence_length, batch_size)
    stream = corpus.dataset("train", repeat=True)
    options = {"shuffle_buffer": config.shuffle_buffer, "seed": config.seed}
    if config.objective == "causal":
        return lm_batches.causal_lm_dataset(stream, *shape, **options)
    return lm_batches.masked_lm_dataset(
        stream,
        *shape,
        mask_rate=config.mask_rate,
        max_predictions=config.max_predictions,
        **options,
    )


def unigram_baseline(config, corpus, tokenizer, validation):
    """Held-out perplexity of the training tokens' unigram frequencies."""
    from keras_gmlp.data import lm_batches
    from keras_gmlp.data import vocabulary as vocabularies

    if not config.unigram_tokens:
        return None
    ids = vocabularies.special_ids(tokenizer)
    never_targets = [ids[vocabularies.PAD], ids[vocabularies.CLS]]
    if config.objective == "mlm":
        never_targets.append(ids[vocabularies.SEP])
    counts = lm_batches.token_counts(
        lm_batches.tokenize_records(
            corpus.dataset("train"), tokenizer, ids[vocabularies.SEP]
        ),
        tokenizer.vocabulary_size(),
        max_tokens=config.unigram_tokens,
        exclude=never_targets,
    )
    return lm_batches.unigram_perplexity(counts, validation.as_numpy_iterator())


def build_models(config, vocabulary_size):
    """`(training_model, model, description)` for the config.

    A gMLP run trains its task (`GMLPMaskedLM` or `GMLPCausalLM`, without
    preprocessor: the batches are already masked or shifted), which is
    also the model saved. A baseline trains a wrapper over a keras-hub
    task of the gMLP's parameter count (`build_baseline`).
    """
    model_config = config.model_config(vocabulary_size)
    resolved = resolve_config(
        "text",
        TEXT_DEFAULTS,
        model_config["preset"],
        **{k: v for k, v in model_config.items() if k != "preset"},
    )
    resolved["causal"] = config.objective == "causal"
    from keras_gmlp.baselines import trainable_parameters

    training_model = model = build_task(config.objective, resolved)
    description = {
        "architecture": "gmlp",
        "config": resolved,
        "trainable_parameters": trainable_parameters(model),
    }
    if config.architecture != "gmlp":
        training_model, model, description = build_baseline(
            config, resolved, model
        )
    description["parameters"] = int(model.count_params())
    return training_model, model, description


def build_baseline(config, resolved, gmlp):
    """`(training_model, model, description)` of the config's baseline.

    The keras-hub model (`keras_gmlp.baselines`) at the gMLP's
    width, with the depth (`config.transformer_layers`, or searched) and
    feed-forward size whose trainable parameters match the gMLP task's.
    """
    from keras_gmlp import baselines

    name = baselines.canonical_architecture(
        config.objective, config.architecture
    )
    causal = config.objective == "causal"

    def build(num_layers, hidden_dim, ffn_dim):
        size = {
            "vocabulary_size": resolved["vocabulary_size"],
            "sequence_length": config.sequence_length,
            "num_layers": num_layers,
            "hidden_dim": hidden_dim,
            "ffn_dim": ffn_dim,
            "num_heads": config.transformer_heads,
        }
        if causal:
            task = baselines.causal_lm_baseline(name, **size)
            return task, task
        return baselines.masked_lm_baseline(name, **size)

    target = baselines.trainable_parameters(gmlp)
    size = baselines.matched_size(
        lambda *size: baselines.trainable_parameters(build(*size)[0]),
        target,
        [resolved["hidden_dim"]],
        num_layers=config.transformer_layers,
    )
    training_model, model = build(
        size["num_layers"], size["hidden_dim"], size["ffn_dim"]
    )
    description = {
        "architecture": config.architecture,
        "baseline": name,
        "transformer_layers": size["num_layers"],
        "hidden_dim": size["hidden_dim"],
        "ffn_dim": size["ffn_dim"],
        "trainable_parameters": baselines.trainable_parameters(training_model),
        "gmlp_trainable_parameters": target,
    }
    return training_model, model, description


def build_task(objective, resolved, preprocessor=None):
    """A `GMLPMaskedLM` (`"mlm"`) or `GMLPCausalLM` (`"causal"`).

    Args:
        objective: str. `"mlm"` or `"causal"`.
        resolved: dict. A resolved text configuration (the builders').
        preprocessor: the task's preprocessor, or `None`.
    """
    from keras_gmlp.models import GMLPCausalLM
    from keras_gmlp.models import GMLPMaskedLM
    from keras_gmlp.models import GMLPTextBackbone
    from keras_gmlp.models.gmlp_text.gmlp_text_backbone import BACKBONE_DEFAULTS

    backbone = GMLPTextBackbone(
        **{key: resolved[key] for key in BACKBONE_DEFAULTS if key != "name"}
    )
    task = GMLPCausalLM if objective == "causal" else GMLPMaskedLM
    return task(
        backbone,
        preprocessor=preprocessor,
        name=resolved.get("name"),
        compile=False,
    )


def task_preprocessor(config, tokenizer):
    """The preprocessor a saved gMLP task carries, for raw strings."""
    from keras_gmlp.data.lm_batches import masked_lm_preprocessor
    from keras_gmlp.models import GMLPCausalLMPreprocessor

    if config.objective == "causal":
        return GMLPCausalLMPreprocessor(
            tokenizer, sequence_length=config.sequence_length
        )
    return masked_lm_preprocessor(
        tokenizer,
        config.sequence_length,
        config.mask_rate,
        config.max_predictions,
    )


def model_inputs(dataset, model):
    """Gives `model` the parts of the batches' inputs it takes.

    The batches hold what the gMLP tasks take (`token_ids`,
    `padding_mask` and, for a masked LM, `mask_positions`); a Transformer
    baseline (or a model of an earlier version) takes fewer.
    """
    expected = model.input
    if isinstance(expected, dict):
        keys = set(expected)
        if keys >= {"token_ids", "padding_mask"}:
            return dataset
        return dataset.map(
            lambda x, y, w: ({k: v for k, v in x.items() if k in keys}, y, w)
        )
    return dataset.map(lambda x, y, w: (x["token_ids"], y, w))


def compile_model(model, config, schedule):
    """AdamW (epsilon 1e-6), token cross-entropy, accuracy, perplexity."""
    training_job.compile_task(
        model,
        config,
        schedule,
        language_model_loss(),
        epsilon=1e-6,
        weighted_metrics=language_model_metrics(
            "masked" if config.objective == "mlm" else "next_token"
        ),
    )


def run(config, callbacks=None):
    """Pretrains a language model; returns the results of `results.json`.

    Args:
        config: `PretrainingConfig`.
        callbacks: list of `keras.callbacks.Callback` or `None`. Extra
            callbacks for `model.fit`.

    Returns:
        The results dict (`None` on a worker that is not the chief). A
        folder holding this run finished returns its
        results untrained; one holding another run is refused
        (`training_job.run_in_folder`).
    """
    from keras_gmlp.baselines import default_learning_rate

    distribution = training_job.start(config)
    if config.learning_rate is None:
        config = dataclasses.replace(
            config,
            learning_rate=default_learning_rate(
                config.objective, config.architecture
            ),
        )
    return training_job.run_in_folder(
        JOB,
        config,
        distribution,
        lambda: train(config, distribution, callbacks),
    )


def train(config, distribution, callbacks=None):
    """Pretrains the model of a config in its claimed folder.

    Args:
        config: `PretrainingConfig`, its learning rate set.
        distribution: `keras_gmlp.training.Distribution`.
        callbacks: list of `keras.callbacks.Callback` or `None`.

    Returns:
        The results dict (`None` on a worker that is not the chief).
    """
    from keras_gmlp.data.vocabulary import make_tokenizer

    corpus = make_corpus(config)
    vocabulary = prepare_vocabulary(config, corpus)
    tokenizer = make_tokenizer(vocabulary, lowercase=not config.cased)
    batch_size = config.global_batch_size(distribution.num_replicas)
    total_steps = config.epochs * config.steps_per_epoch
    # The held-out batches are masked before any model draws random numbers.
    validation_data = heldout_batches(config, corpus, tokenizer, batch_size)
    train_data = training_batches(config, corpus, tokenizer, batch_size)
    with distribution.scope(), config.remat_scope():
        training_model, model, description = build_models(
            config, len(vocabulary)
        )
    train_data = model_inputs(train_data, training_model)
    validation_data = model_inputs(validation_data, training_model)
    with distribution.scope():
        peak_learning_rate = config.peak_learning_rate(batch_size)
        schedule = warmup_linear(
            peak_learning_rate, total_steps, config.warmup_steps(total_steps)
        )
        compile_model(training_model, config, schedule)
    if distribution.is_chief:
        run_folder.write_run_config(
            config.output_dir,
            JOB,
            config,
            objective=config.objective,
            architecture=config.architecture,
            sequence_length=config.sequence_length,
            cased=config.cased,
            model=description,
        )
    print(
        f"{description['architecture']} {config.objective} model with "
        f"{description['parameters']:,} parameters, batch {batch_size}, "
        f"{total_steps} steps on {distribution}."
    )
    history, wall_time = training_job.fit_task(
        training_model,
        train_data,
        validation_data,
        config,
        distribution,
        config.steps_per_epoch,
        callbacks,
        monitor="val_perplexity",
        mode="min",
        endless_stream=True,
    )
    if config.architecture == "gmlp" and distribution.is_chief:
        # The trained backbone in a task that takes raw strings, with its
        # tokenizer: `GMLPMaskedLM.from_preset(output_dir/preset)`.
        saved = type(model)(
            model.backbone,
            preprocessor=task_preprocessor(config, tokenizer),
            name=model.name,
            compile=False,
        )
        files.save_to_preset(saved, os.path.join(config.output_dir, PRESET_DIR))
    if not distribution.is_chief:
        return None
    accuracy = "val_masked_accuracy"
    if config.objective == "causal":
        accuracy = "val_next_token_accuracy"
    metrics = {
        "val_perplexity": history["val_perplexity"][-1],
        accuracy: history[accuracy][-1],
        "val_loss": history["val_loss"][-1],
        "best_val_perplexity": min(history["val_perplexity"]),
    }
    baseline = unigram_baseline(config, corpus, tokenizer, validation_data)
    if baseline is not None:
        metrics["val_unigram_perplexity"] = baseline
    tokens = total_steps * batch_size * config.sequence_length
    results = write_results(
        config.output_dir,
        config,
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


def _run_settings(run_dir):
    """`(record, config, tokenizer, vocabulary)` of a pretraining run."""
    from keras_gmlp.data import vocabulary as vocabularies

    record = run_folder.read_run_config(run_dir)
    if record["job"] != JOB:
        raise ValueError(
            f"{run_dir!r} holds a {record['job']} run; expected a "
            "pretraining run (keras-gmlp pretrain)."
        )
    values = dict(record["config"])
    for key in ("objective", "architecture", "sequence_length", "cased"):
        if key in record:
            values[key] = record[key]
    config = PretrainingConfig.from_dict(values)
    vocabulary = vocabularies.load_vocabulary(
        os.path.join(run_dir, VOCABULARY_FILE)
    )
    return record, config, vocabulary


def _import_baselines(config):
    if config.architecture != "gmlp":
        import keras_hub  # noqa: F401 (registers keras-hub's classes)


def evaluate_run(run_dir, checkpoint=LAST_CHECKPOINT, unigram=False):
    """Scores a run's model again on its seeded held-out batches.

    Every run of the same corpus, sequence length, batch and seed is
    scored on the very same targets, whichever model it trained.

    Args:
        run_dir: str. The run's `output_dir`.
        checkpoint: str. The (compiled) checkpoint scored. Defaults to
            `"last.keras"`, the model of the last epoch. When it exists
            but cannot be read (truncated by a crash), the run's other
            checkpoint is scored, with a printed line.
        unigram: bool. Whether to add the unigram baseline of the same
            targets (`"unigram_perplexity"`). Defaults to `False`.

    Returns:
        A dict of `loss`, `perplexity` and the token accuracy.
    """
    from keras_gmlp.data.vocabulary import make_tokenizer

    record, config, vocabulary = _run_settings(run_dir)
    _import_baselines(config)
    corpus = make_corpus(config)
    tokenizer = make_tokenizer(vocabulary, lowercase=not config.cased)
    batch_size = config.global_batch_size(1)
    if os.path.exists(os.path.join(run_dir, run_folder.RESULTS_FILE)):
        with open(os.path.join(run_dir, run_folder.RESULTS_FILE)) as file:
            batch_size = json.load(file).get("global_batch_size", batch_size)
    validation = heldout_batches(config, corpus, tokenizer, batch_size)
    names = [checkpoint]
    if os.path.exists(os.path.join(run_dir, checkpoint)):
        # A truncated checkpoint is passed over for the run's other one.
        names += [
            name
            for name in (LAST_CHECKPOINT, BEST_CHECKPOINT)
            if name != checkpoint
        ]
    # Compiled here: the text tasks' checkpoints do not restore their own
    # compile settings (losses and metrics) when loaded.
    model = run_folder.load_checkpoint(run_dir, names)
    model.compile(
        loss=language_model_loss(),
        weighted_metrics=language_model_metrics(
            "masked" if config.objective == "mlm" else "next_token"
        ),
    )
    metrics = model.evaluate(
        model_inputs(validation, model), return_dict=True, verbose=0
    )
    metrics = {key: float(value) for key, value in metrics.items()}
    if unigram:
        config.unigram_tokens = config.unigram_tokens or 5_000_000
        metrics["unigram_perplexity"] = unigram_baseline(
            config, corpus, tokenizer, validation
        )
    return metrics


def load_task(run_dir, config):
    """A gMLP run's task from its preset (runs of earlier versions: their
    best checkpoint), and whether it came from the preset."""
    preset = os.path.join(run_dir, PRESET_DIR)
    if os.path.isdir(preset):
        from keras_gmlp.models import GMLPCausalLM
        from keras_gmlp.models import GMLPMaskedLM

        task = GMLPCausalLM if config.objective == "causal" else GMLPMaskedLM
        return run_folder.load_preset(task, preset), True
    _import_baselines(config)
    names = (BEST_CHECKPOINT, LAST_CHECKPOINT)
    if config.objective == "causal":
        names = (CAUSAL_LM_FILE,) + names
    return run_folder.load_checkpoint(run_dir, names), False


def fill_in_the_blank(run_dir, sentence, top_k=5):
    """Top-k fillers of each `[MASK]` of `sentence`, from a masked-LM run.

    Args:
        run_dir: str. The run's folder (preset, vocabulary).
        sentence: str. Text with one or more `[MASK]`.
        top_k: int. Fillers per mask. Defaults to `5`.

    Returns:
        A list, one entry per `[MASK]`, of `(token, probability)` pairs.
    """
    from keras_gmlp.data import vocabulary as vocabularies

    record, config, vocabulary = _run_settings(run_dir)
    tokenizer = vocabularies.make_tokenizer(
        vocabulary, lowercase=not config.cased, special_tokens_in_strings=True
    )
    ids = vocabularies.special_ids(tokenizer)
    tokens = np.asarray(tokenizer.tokenize([sentence])[0]).tolist()
    cls, sep = ids[vocabularies.CLS], ids[vocabularies.SEP]
    token_ids = np.array([[cls, *tokens, sep]], "int32")
    positions = np.flatnonzero(token_ids[0] == ids[vocabularies.MASK])
    if not len(positions):
        raise ValueError(
            f"Received {sentence!r}; expected a text with at least one "
            f"{vocabularies.MASK}."
        )
    if config.objective != "mlm":
        raise ValueError(
            f"The run in {run_dir!r} trained a {config.objective!r} model; "
            "filling [MASK]s needs a masked-LM run."
        )
    length = config.sequence_length
    if token_ids.shape[1] > length:
        raise ValueError(
            f"The text is {token_ids.shape[1]} tokens long with [CLS] and "
            f"[SEP]; the model takes at most {length}."
        )
    model, _ = load_task(run_dir, config)
    inputs = {
        "token_ids": token_ids,
        "padding_mask": np.ones_like(token_ids),
        "mask_positions": positions[None, :].astype("int32"),
    }
    if "padding_mask" not in model.input:
        del inputs["padding_mask"]
    # The model itself, not `predict`: a task's preprocessor takes strings.
    logits = keras.ops.convert_to_numpy(model(inputs, training=False))[0]
    return [predictions.top_k(row, vocabulary, top_k) for row in logits]


def generate_text(
    run_dir,
    prompt,
    max_new_tokens=20,
    strategy="greedy",
    top_k=10,
    temperature=1.0,
    seed=None,
):
    """Continues `prompt` with the task of a causal gMLP run.

    `GMLPCausalLM.generate` with keras-hub's greedy or top-k sampler;
    generation stops at `[SEP]`, the end of a record in the training
    stream, or after `max_new_tokens` (or at the model's
    `sequence_length`).

    Args:
        run_dir: str. The run's folder (`preset/`).
        prompt: str. The start of the text.
        max_new_tokens: int. Defaults to `20`.
        strategy: str. `"greedy"` or `"top_k"`. Defaults to `"greedy"`.
        top_k: int. Candidates of `"top_k"` sampling. Defaults to `10`.
        temperature: float. Divides the logits of `"top_k"` sampling.
            Defaults to `1.0`.
        seed: int or `None`. Seed of the sampling.

    Returns:
        str: the prompt's tokens and the generated ones, detokenized.
    """
    import keras_hub

    record, config, vocabulary = _run_settings(run_dir)
    if config.objective != "causal" or config.architecture != "gmlp":
        raise ValueError(
            f"The run in {run_dir!r} trained a {config.architecture} "
            f"{config.objective!r} model; generating needs a causal gMLP "
            "run (keras-gmlp pretrain --objective causal)."
        )
    if strategy not in ("greedy", "top_k"):
        raise ValueError(
            f"Received strategy={strategy!r}; expected 'greedy' or 'top_k'."
        )
    task, from_preset = load_task(run_dir, config)
    if not from_preset:
        return _generate_with_plain_model(
            task, config, vocabulary, prompt, max_new_tokens, strategy,
            top_k, temperature, seed,
        )  # fmt: skip
    tokenizer = task.preprocessor.tokenizer
    prompt_length = 1 + len(np.asarray(tokenizer(prompt)).tolist())
    max_length = min(config.sequence_length, prompt_length + max_new_tokens)
    if strategy == "greedy":
        sampler = keras_hub.samplers.GreedySampler()
    else:
        sampler = keras_hub.samplers.TopKSampler(
            k=top_k, seed=seed, temperature=temperature
        )
    task.compile(sampler=sampler)
    return task.generate(prompt, max_length=max_length)


def _generate_with_plain_model(
    model, config, vocabulary, prompt, max_new_tokens, strategy, top_k,
    temperature, seed,
):  # fmt: skip
    """`keras_gmlp.generation.generate` on a `causal_lm.keras` model."""
    from keras_gmlp.data import vocabulary as vocabularies
    from keras_gmlp.generation import generate

    tokenizer = vocabularies.make_tokenizer(
        vocabulary, lowercase=not config.cased
    )
    ids = vocabularies.special_ids(tokenizer)
    tokens = np.asarray(tokenizer.tokenize(prompt)).tolist()
    generated = generate(
        model,
        [ids[vocabularies.CLS], *tokens],
        max_new_tokens=max_new_tokens,
        strategy=strategy,
        top_k=top_k,
        temperature=temperature,
        seed=seed,
        end_token_id=ids[vocabularies.SEP],
    )
    special = {ids[token] for token in vocabularies.SPECIAL_TOKENS}
    kept = [int(i) for i in generated if int(i) not in special]
    return str(tokenizer.detokenize(np.array(kept, "int32")))
