"""Language-model batches: tokenized, packed, masked or shifted, in tf.data.

- `pack_sequences` concatenates tokenized records (each followed by
  `[SEP]`, `tokenize_records`) and cuts them into `[CLS] ... [SEP]`
  sequences, so no token is wasted on padding during training.
- `masked_lm_dataset` masks batches with keras-hub's
  `MaskedLMMaskGenerator` (15 %, 80/10/10) inside tf.data;
  `masked_lm_heldout_batches` masks held-out batches once, the same for
  every run of a seed; `causal_lm_dataset` makes next-token batches.
- `token_counts` and `unigram_perplexity` give the unigram baseline a
  language model has to beat.

This module imports TensorFlow: import it explicitly
(`from keras_gmlp.data import lm_batches`), never from `keras_gmlp`.
"""

import math

import numpy as np
import tensorflow as tf

from keras_gmlp.data.vocabulary import CLS
from keras_gmlp.data.vocabulary import MASK
from keras_gmlp.data.vocabulary import PAD
from keras_gmlp.data.vocabulary import SEP
from keras_gmlp.data.vocabulary import special_ids


def pack_sequences(token_stream, sequence_length, cls_id, sep_id, pad_id=0):
    """Packs a stream of token ids into `[CLS] ... [SEP]` sequences.

    The stream (records already separated by `[SEP]`, as
    `tokenize_records` makes it) is cut into pieces of
    `sequence_length - 2` tokens, and each piece is framed by `[CLS]` and
    `[SEP]`: no token is wasted on padding, except in the last sequence of
    a finite dataset, which is padded with `pad_id`.

    Args:
        token_stream: `tf.data.Dataset` of 1-D int32 vectors whose
            concatenation is the token stream.
        sequence_length: int. Tokens per sequence, at least 3.
        cls_id: int. Id of `[CLS]`.
        sep_id: int. Id of `[SEP]`.
        pad_id: int. Id of `[PAD]`.

    Returns:
        A dataset of int32 vectors of shape `(sequence_length,)`.
    """
    if sequence_length < 3:
        raise ValueError(
            f"Received sequence_length={sequence_length}; expected at least "
            "3 ([CLS], a token and [SEP])."
        )
    body_length = sequence_length - 2

    def frame(body):
        body = tf.cast(body, tf.int32)
        padding = tf.fill([body_length - tf.shape(body)[0]], pad_id)
        sequence = tf.concat([[cls_id], body, [sep_id], padding], axis=0)
        return tf.ensure_shape(sequence, (sequence_length,))

    dataset = token_stream.rebatch(body_length, drop_remainder=False)
    return dataset.map(frame, num_parallel_calls=tf.data.AUTOTUNE)


def tokenize_records(texts, tokenizer, sep_id, batch_size=256):
    """Tokenizes records in parallel into a stream of token ids.

    Args:
        texts: `tf.data.Dataset` of scalar strings.
        tokenizer: a keras-hub tokenizer.
        sep_id: int. Id of `[SEP]`, appended to each record.
        batch_size: int. Records tokenized together.

    Returns:
        A dataset of 1-D int32 vectors, each the tokens of `batch_size`
        records, each record followed by `[SEP]`.
    """

    def tokenize(batch):
        ragged = tf.cast(tokenizer.tokenize(batch), tf.int32)
        separators = tf.fill([tf.shape(batch)[0], 1], sep_id)
        return tf.concat([ragged, separators], axis=1).flat_values

    return texts.batch(batch_size).map(
        tokenize, num_parallel_calls=tf.data.AUTOTUNE
    )


def default_max_predictions(sequence_length, mask_rate=0.15):
    """Masked positions per sequence: enough for `mask_rate` of them."""
    return min(sequence_length, math.ceil(sequence_length * mask_rate) + 1)


def masked_lm_dataset(
    texts,
    tokenizer,
    sequence_length,
    batch_size,
    mask_rate=0.15,
    max_predictions=None,
    shuffle_buffer=0,
    seed=None,
):
    """Makes masked-LM batches from a dataset of records.

    The records are packed into `[CLS] ... [SEP]` sequences and masked by
    the masked LM's own preprocessor (`GMLPMaskedLMPreprocessor.
    mask_packed`, keras-hub's `MaskedLMMaskGenerator`), as
    `GMLPMaskedLM` masks raw strings.

    Args:
        texts: `tf.data.Dataset` of scalar strings.
        tokenizer: a `GMLPTokenizer` (`make_tokenizer`).
        sequence_length: int. Tokens per sequence.
        batch_size: int. Sequences per batch (the last may be smaller).
        mask_rate: float. Share of tokens selected for prediction; of
            those 80 % become `[MASK]`, 10 % a random token, 10 % stay.
        max_predictions: int. Masked positions per sequence; defaults to
            `default_max_predictions`.
        shuffle_buffer: int. Packed sequences shuffled together; 0 for
            none.
        seed: int. Seed of the shuffling.

    Returns:
        A dataset of `(inputs, labels, sample_weights)`, with `inputs` a
        dict of `"token_ids"` and `"padding_mask"` (int32, 1 for real
        tokens) `(batch, sequence_length)` and `"mask_positions"` `(batch,
        max_predictions)`, `labels` the original ids at those positions
        and `sample_weights` 1 where a position is real, 0 where it is
        filler.
    """
    preprocessor = masked_lm_preprocessor(
        tokenizer, sequence_length, mask_rate, max_predictions
    )
    sequences = packed_sequences(texts, tokenizer, sequence_length)
    if shuffle_buffer:
        sequences = sequences.shuffle(shuffle_buffer, seed=seed)
    dataset = sequences.batch(batch_size)
    dataset = dataset.map(
        lambda batch: _int32_batch(preprocessor.mask_packed(batch)),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def masked_lm_preprocessor(
    tokenizer, sequence_length, mask_rate=0.15, max_predictions=None
):
    """The `GMLPMaskedLMPreprocessor` of the masked-LM batches, built.

    Args:
        tokenizer: a `GMLPTokenizer`.
        sequence_length: int. Tokens per sequence.
        mask_rate: float. Share of tokens selected for prediction.
        max_predictions: int or `None`. Masked positions per sequence;
            defaults to `default_max_predictions`.
    """
    from keras_gmlp.models.gmlp_text.gmlp_masked_lm_preprocessor import (
        GMLPMaskedLMPreprocessor,
    )

    preprocessor = GMLPMaskedLMPreprocessor(
        tokenizer,
        sequence_length=sequence_length,
        mask_selection_rate=mask_rate,
        mask_selection_length=max_predictions
        or default_max_predictions(sequence_length, mask_rate),
    )
    # Built here, eagerly: the masking then runs inside tf.data.
    preprocessor.build(None)
    return preprocessor


def _int32_batch(batch):
    inputs, labels, weights = batch
    inputs = {
        "token_ids": tf.cast(inputs["token_ids"], tf.int32),
        "padding_mask": tf.cast(inputs["padding_mask"], tf.int32),
        "mask_positions": tf.cast(inputs["mask_positions"], tf.int32),
    }
    return inputs, tf.cast(labels, tf.int32), tf.cast(weights, tf.float32)


def masked_lm_heldout_batches(
    texts,
    tokenizer,
    sequence_length,
    batch_size,
    max_batches,
    mask_rate=0.15,
    max_predictions=None,
    seed=0,
):
    """Masks the first held-out batches once, reproducibly, for evaluation.

    The batches are packed as `masked_lm_dataset` packs them and masked by
    the same rule as keras-hub's `MaskedLMMaskGenerator` (per sequence,
    `ceil(mask_rate * maskable tokens)` positions, special tokens never,
    at most `max_predictions`, drawn uniformly; of those 80 % `[MASK]`,
    10 % a random token, 10 % unchanged), but with a numpy generator seeded by
    `seed`: every call with the same seed scores the same targets, whatever
    model is trained and whatever ran before. (keras-hub's generator draws
    from TensorFlow's stateful random ops, whose sequence depends on the
    process' history and, inside tf.data, on thread timing.)

    Args:
        texts: `tf.data.Dataset` of scalar strings (the held-out records).
        tokenizer: a `make_tokenizer` WordPiece tokenizer.
        sequence_length: int. Tokens per sequence.
        batch_size: int. Sequences per batch (the last may be smaller).
        max_batches: int. Largest number of batches.
        mask_rate: float. As in `masked_lm_dataset`.
        max_predictions: int. As in `masked_lm_dataset`.
        seed: int. Seed of the masks.

    Returns:
        A cached dataset of at most `max_batches` `(inputs, labels,
        sample_weights)` batches, as `masked_lm_dataset` makes them.

    Raises:
        ValueError: when the records give no batch.
    """
    ids = special_ids(tokenizer)
    max_predictions = max_predictions or default_max_predictions(
        sequence_length, mask_rate
    )
    rng = np.random.default_rng(seed)
    sequences = packed_sequences(texts, tokenizer, sequence_length)
    dataset = None
    for batch in sequences.batch(batch_size).take(max_batches):
        masked = _numpy_masked_batch(
            batch.numpy(),
            rng,
            tokenizer.vocabulary_size(),
            ids[MASK],
            ids[PAD],
            _special_token_ids(tokenizer),
            mask_rate,
            max_predictions,
        )
        single = tf.data.Dataset.from_tensors(masked)
        dataset = single if dataset is None else dataset.concatenate(single)
    if dataset is None:
        raise ValueError(
            "The held-out split gives no batch; expected held-out text "
            "(--validation-files, or a larger --validation-fraction)."
        )
    return dataset.cache()


def _numpy_masked_batch(
    sequences,
    rng,
    vocabulary_size,
    mask_id,
    pad_id,
    unselectable,
    mask_rate,
    max_predictions,
):
    tokens = sequences.astype("int32")
    padding_mask = (sequences != pad_id).astype("int32")
    shape = (len(tokens), max_predictions)
    positions = np.zeros(shape, "int32")
    labels = np.zeros(shape, "int32")
    weights = np.zeros(shape, "float32")
    for row, sequence in enumerate(sequences):
        maskable = np.flatnonzero(~np.isin(sequence, unselectable))
        count = min(math.ceil(len(maskable) * mask_rate), max_predictions)
        chosen = np.sort(rng.choice(maskable, count, replace=False))
        positions[row, :count] = chosen
        labels[row, :count] = sequence[chosen]
        weights[row, :count] = 1.0
        draw = rng.random(count)
        tokens[row, chosen[draw < 0.8]] = mask_id
        randomised = chosen[(draw >= 0.8) & (draw < 0.9)]
        tokens[row, randomised] = rng.integers(
            0, vocabulary_size, len(randomised)
        )
    inputs = {
        "token_ids": tokens,
        "padding_mask": padding_mask,
        "mask_positions": positions,
    }
    return inputs, labels, weights


def _special_token_ids(tokenizer):
    """The ids never masked: every special token, as the preprocessor."""
    special = getattr(tokenizer, "special_token_ids", None)
    if special:
        return list(special)
    ids = special_ids(tokenizer)
    return [ids[PAD], ids[CLS], ids[SEP]]


def packed_sequences(texts, tokenizer, sequence_length):
    """Tokenized records packed into `[CLS] ... [SEP]` sequences.

    Args:
        texts: `tf.data.Dataset` of scalar strings.
        tokenizer: a `GMLPTokenizer`.
        sequence_length: int. Tokens per sequence.

    Returns:
        A dataset of int32 vectors `(sequence_length,)`.
    """
    ids = special_ids(tokenizer)
    return pack_sequences(
        tokenize_records(texts, tokenizer, ids[SEP]),
        sequence_length,
        ids[CLS],
        ids[SEP],
        ids[PAD],
    )


def causal_lm_dataset(
    texts,
    tokenizer,
    sequence_length,
    batch_size,
    shuffle_buffer=0,
    seed=None,
):
    """Makes next-token batches from a dataset of records.

    Sequences of `sequence_length + 1` packed tokens give inputs (all but
    the last token) and labels (all but the first).

    Args:
        texts: `tf.data.Dataset` of scalar strings.
        tokenizer: a `make_tokenizer` WordPiece tokenizer.
        sequence_length: int. Tokens per input sequence.
        batch_size: int. Sequences per batch.
        shuffle_buffer: int. Packed sequences shuffled together; 0 for
            none.
        seed: int. Seed of the shuffling.

    Returns:
        A dataset of `(inputs, labels, sample_weights)`: `inputs` a dict
        of `"token_ids"` and `"padding_mask"`, `(batch, sequence_length)`,
        as `GMLPCausalLM` takes them (and its preprocessor makes them of
        raw strings); labels and weights `(batch, sequence_length)`, the
        weights 0 where the label is `[PAD]`.
    """
    ids = special_ids(tokenizer)
    sequences = pack_sequences(
        tokenize_records(texts, tokenizer, ids[SEP]),
        sequence_length + 1,
        ids[CLS],
        ids[SEP],
        ids[PAD],
    )
    if shuffle_buffer:
        sequences = sequences.shuffle(shuffle_buffer, seed=seed)

    def shift(batch):
        token_ids, labels = batch[:, :-1], batch[:, 1:]
        weights = tf.cast(tf.not_equal(labels, ids[PAD]), tf.float32)
        inputs = {
            "token_ids": token_ids,
            "padding_mask": tf.cast(
                tf.not_equal(token_ids, ids[PAD]), tf.int32
            ),
        }
        return inputs, labels, weights

    dataset = sequences.batch(batch_size)
    dataset = dataset.map(shift, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.prefetch(tf.data.AUTOTUNE)


def fixed_batches(dataset, max_batches):
    """Caches the first batches of a dataset, to evaluate on the same ones.

    The batches are computed (and masked) once; every later pass reads
    the same ones, so evaluations during a run are comparable. The
    result has a known length, as Keras' evaluation expects.

    Args:
        dataset: `tf.data.Dataset` of batches, such as the held-out
            `masked_lm_dataset`.
        max_batches: int. Largest number of batches kept.

    Returns:
        The cached dataset.

    Raises:
        ValueError: when the dataset gives no batch.
    """
    cached = dataset.take(max_batches).cache()
    count = sum(1 for _ in cached)
    if count == 0:
        raise ValueError(
            "The held-out split gives no batch; expected held-out text "
            "(--validation-files, or a larger --validation-fraction)."
        )
    return cached.apply(tf.data.experimental.assert_cardinality(count))


def token_counts(token_stream, vocabulary_size, max_tokens=None, exclude=()):
    """Counts token ids in a stream of token id vectors.

    Args:
        token_stream: `tf.data.Dataset` of 1-D int vectors, such as
            `tokenize_records` makes.
        vocabulary_size: int.
        max_tokens: int. Stop after about this many tokens; `None` reads
            the whole stream.
        exclude: ids whose count is set to 0 (tokens never predicted).

    Returns:
        A float64 array `(vocabulary_size,)`.
    """
    import numpy as np

    counts = np.zeros(vocabulary_size, np.float64)
    seen = 0
    for ids in token_stream.as_numpy_iterator():
        counts += np.bincount(ids.reshape(-1), minlength=vocabulary_size)
        seen += ids.size
        if max_tokens is not None and seen >= max_tokens:
            break
    counts[list(exclude)] = 0.0
    return counts


def unigram_perplexity(counts, validation_batches):
    """Held-out perplexity of a unigram model of the training tokens.

    The baseline a language model has to beat: every target predicted by
    its frequency in the training split (add-one smoothed over the ids
    with a non-zero count or seen as targets), scored on the same held-out
    targets and weights as the model.

    Args:
        counts: float array `(vocabulary_size,)`, e.g. from `token_counts`;
            ids that are never targets have count 0.
        validation_batches: iterable of `(inputs, labels, weights)`.

    Returns:
        float.
    """
    import numpy as np

    targets, target_weights = [], []
    for _, labels, weights in validation_batches:
        targets.append(np.asarray(labels).reshape(-1))
        target_weights.append(np.asarray(weights, np.float64).reshape(-1))
    if not targets:
        raise ValueError("Received no validation batch.")
    targets = np.concatenate(targets)
    target_weights = np.concatenate(target_weights)
    if target_weights.sum() == 0:
        raise ValueError("The validation batches have no weighted target.")
    keep = target_weights > 0
    targets, target_weights = targets[keep], target_weights[keep]
    possible = counts > 0
    possible[targets] = True
    smoothed = np.where(possible, counts + 1.0, 0.0)
    log_probability = np.log(smoothed[targets] / smoothed.sum())
    mean = -(log_probability * target_weights).sum() / target_weights.sum()
    return float(np.exp(mean))
