"""Text corpora to tf.data: streaming, splits, WordPiece, packing, masking.

The pieces of the language-model recipes, in the order the data flows:

1. `TextCorpus` streams records (lines or blank-line separated paragraphs)
   from plain-text files matched by glob patterns, or the strings of a
   tensorflow-datasets dataset. Files are read one record at a time, never
   whole. Bytes that are not valid UTF-8 are replaced (or the record is
   skipped) and counted in `TextCorpus.stats`.
2. A deterministic hash of each record decides its split (`is_validation`),
   so a held-out record never reaches training, whatever the order, the
   number of epochs or duplicates in the corpus.
3. `train_vocabulary` learns a WordPiece vocabulary with keras-hub;
   `save_vocabulary` / `load_vocabulary` keep it with the run. `[PAD]` is
   always id 0, the id the models mask.
4. `pack_sequences` concatenates tokenized records (each followed by
   `[SEP]`) and cuts them into `[CLS] ... [SEP]` sequences, so no token is
   wasted on padding during training.
5. `masked_lm_dataset` masks batches with keras-hub's
   `MaskedLMMaskGenerator` (15 %, 80/10/10) inside tf.data;
   `masked_lm_heldout_batches` masks held-out batches once, the same for
   every run of a seed; `causal_lm_dataset` makes next-token batches.

This module imports TensorFlow: import it explicitly
(`from keras_gmlp.data import text`), never from `keras_gmlp`.
"""

import glob
import hashlib
import math
import os

import numpy as np
import tensorflow as tf

PAD = "[PAD]"
UNK = "[UNK]"
CLS = "[CLS]"
SEP = "[SEP]"
MASK = "[MASK]"
SPECIAL_TOKENS = (PAD, UNK, CLS, SEP, MASK)
RECORD_MODES = ("line", "paragraph")
DECODE_ERRORS = ("replace", "skip")
HASH_BUCKETS = 1_000_000


class CorpusStats:
    """Counts of what a `TextCorpus` read, updated as records stream.

    Attributes:
        records: int. Non-empty records yielded (both splits).
        bytes: int. Bytes of the records yielded.
        invalid_utf8: int. Records that held bytes that are not UTF-8.
        skipped: int. Records dropped for invalid UTF-8 (`"skip"` policy).
        truncated: int. Paragraphs cut at `max_record_chars`.
    """

    def __init__(self):
        self.records = 0
        self.bytes = 0
        self.invalid_utf8 = 0
        self.skipped = 0
        self.truncated = 0

    def as_dict(self):
        return dict(vars(self))

    def __repr__(self):
        items = ", ".join(f"{k}={v}" for k, v in vars(self).items())
        return f"CorpusStats({items})"


def record_bucket(text):
    """Returns the split bucket in `[0, HASH_BUCKETS)` of a record.

    Args:
        text: str. The record.

    Returns:
        int, the same for the same text on any machine and run.
    """
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % HASH_BUCKETS


def is_validation(text, validation_fraction):
    """Whether a record belongs to the held-out split.

    Args:
        text: str. The record.
        validation_fraction: float. Share of records held out, in `[0, 1)`.

    Returns:
        bool.
    """
    return record_bucket(text) < validation_fraction * HASH_BUCKETS


def expand_patterns(patterns):
    """Returns the sorted files matched by glob patterns.

    Args:
        patterns: str (comma-separated) or list of str. Glob patterns,
            `**` recursing into folders.

    Raises:
        FileNotFoundError: when a pattern matches no file.
    """
    if isinstance(patterns, str):
        patterns = [p for p in patterns.split(",") if p]
    files = []
    for pattern in patterns:
        matched = sorted(
            path
            for path in glob.glob(os.path.expanduser(pattern), recursive=True)
            if os.path.isfile(path)
        )
        if not matched:
            raise FileNotFoundError(
                f"No text file matches {pattern!r}; expected a glob of "
                "plain-text files, such as 'corpus/*.txt'."
            )
        files.extend(matched)
    return files


def read_text_records(
    files,
    record="line",
    decode_errors="replace",
    max_record_chars=100_000,
    stats=None,
):
    """Streams text records from plain-text files, one at a time.

    Args:
        files: list of str. Paths of the files.
        record: str. `"line"` (a record per line) or `"paragraph"` (lines
            up to a blank line). Defaults to `"line"`.
        decode_errors: str. What to do with bytes that are not UTF-8:
            `"replace"` them by U+FFFD and keep the record, or `"skip"` the
            record. Either way they are counted. Defaults to `"replace"`.
        max_record_chars: int. Bytes after which a record is cut (never
            inside a UTF-8 character), so a file without line breaks or
            blank lines cannot fill the memory. Cuts are counted.
        stats: `CorpusStats` to update, or `None`.

    Yields:
        str, non-empty records with surrounding white space stripped.
    """
    if record not in RECORD_MODES:
        raise ValueError(
            f"Received record={record!r}; expected one of {RECORD_MODES}."
        )
    if decode_errors not in DECODE_ERRORS:
        raise ValueError(
            f"Received decode_errors={decode_errors!r}; expected one of "
            f"{DECODE_ERRORS}."
        )
    stats = stats if stats is not None else CorpusStats()

    def finish(raw_lines):
        raw = b"".join(raw_lines)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            stats.invalid_utf8 += 1
            if decode_errors == "skip":
                stats.skipped += 1
                return None
            text = raw.decode("utf-8", errors="replace")
        text = " ".join(text.split()) if record == "paragraph" else text
        text = text.strip()
        if not text:
            return None
        stats.records += 1
        stats.bytes += len(raw)
        return text

    for path in files:
        pending, pending_chars = [], 0
        for line in _read_lines(path, max_record_chars, stats):
            if record == "line":
                text = finish([line])
                if text is not None:
                    yield text
                continue
            if line.strip():
                pending.append(line)
                pending_chars += len(line)
                if pending_chars < max_record_chars:
                    continue
                stats.truncated += 1
            text = finish(pending) if pending else None
            pending, pending_chars = [], 0
            if text is not None:
                yield text
        if pending:
            text = finish(pending)
            if text is not None:
                yield text


def _read_lines(path, max_chars, stats):
    """Yields the lines of a file, cutting lines longer than `max_chars`.

    A cut never splits a UTF-8 character; it is counted in `stats`.
    """
    carry = b""
    with open(path, "rb") as file:
        while True:
            chunk = carry + file.readline(max(max_chars - len(carry), 1))
            carry = b""
            if not chunk:
                return
            if not chunk.endswith(b"\n") and len(chunk) >= max_chars:
                peek = file.read(1)
                if peek in (b"\n", b""):
                    chunk += peek
                else:
                    carry = peek
                    cut = len(chunk)
                    while cut > 0 and chunk[cut - 1] & 0xC0 == 0x80:
                        cut -= 1
                    if cut > 0 and chunk[cut - 1] >= 0xC0:
                        cut -= 1
                    if cut > 0:
                        chunk, carry = chunk[:cut], chunk[cut:] + carry
                    stats.truncated += 1
            yield chunk


def find_text_feature(features, text_key=None):
    """Returns the name of the text feature of a tfds features dict."""
    names = [
        name
        for name, feature in features.items()
        if getattr(feature, "dtype", None) == tf.string
    ]
    if text_key is not None:
        if text_key not in features:
            raise ValueError(
                f"Received text_key={text_key!r}; the dataset's features are "
                f"{sorted(features)}."
            )
        return text_key
    for preferred in ("text", "sentence", "content", "document", "article"):
        if preferred in names:
            return preferred
    if not names:
        raise ValueError(
            f"The dataset has no string feature among {sorted(features)}; "
            "expected a text dataset."
        )
    return names[0]


class TextCorpus:
    """A text corpus with a training and a held-out split.

    Records come from plain-text files (`files`) or a tensorflow-datasets
    dataset (`tfds_name`). The held-out split is either separate files
    (`validation_files`) or the records whose hash falls in the first
    `validation_fraction` of the buckets, so a record (and every copy of
    it) is always on the same side.

    Args:
        files: str or list of str. Glob patterns of plain-text files.
        tfds_name: str. A tensorflow-datasets name, such as
            `"imdb_reviews"` or `"wikipedia/20230601.en"`.
        tfds_split: str. The tfds split to read. Defaults to `"train"`.
        text_key: str. The tfds text feature; found when `None`.
        data_dir: str. tensorflow-datasets data folder.
        validation_files: str or list of str. Held-out files; when given,
            `validation_fraction` is not used.
        validation_fraction: float. Share of records held out. Defaults to
            `0.01`.
        record: str. `"line"` or `"paragraph"`, see `read_text_records`.
        decode_errors: str. `"replace"` or `"skip"`, see
            `read_text_records`.

    Example:

    >>> import os, tempfile
    >>> from keras_gmlp.data.text import TextCorpus
    >>> folder = tempfile.mkdtemp()
    >>> with open(os.path.join(folder, "a.txt"), "w") as file:
    ...     _ = file.write("one line\\nanother line\\na third line\\n")
    >>> corpus = TextCorpus(
    ...     files=os.path.join(folder, "*.txt"), validation_fraction=0.5)
    >>> texts = list(corpus.records("train"))
    >>> texts += list(corpus.records("validation"))
    >>> sorted(texts)
    ['a third line', 'another line', 'one line']
    """

    def __init__(
        self,
        files=None,
        tfds_name=None,
        tfds_split="train",
        text_key=None,
        data_dir=None,
        validation_files=None,
        validation_fraction=0.01,
        record="line",
        decode_errors="replace",
    ):
        if (files is None) == (tfds_name is None):
            raise ValueError(
                "Expected exactly one of files (--text-files) and tfds_name "
                f"(--tfds-name); received files={files!r}, "
                f"tfds_name={tfds_name!r}."
            )
        if not 0 <= validation_fraction < 1:
            raise ValueError(
                f"Received validation_fraction={validation_fraction}; "
                "expected a number in [0, 1)."
            )
        self.files = expand_patterns(files) if files is not None else None
        self.validation_files = (
            expand_patterns(validation_files) if validation_files else None
        )
        self.tfds_name = tfds_name
        self.tfds_split = tfds_split
        self.text_key = text_key
        self.data_dir = data_dir
        self.validation_fraction = validation_fraction
        self.record = record
        self.decode_errors = decode_errors
        self.stats = CorpusStats()
        if validation_files is None and validation_fraction == 0:
            raise ValueError(
                "Received validation_fraction=0 and no validation files; "
                "expected a held-out split for evaluation."
            )

    def _all_records(self, files):
        if files is not None:
            yield from read_text_records(
                files,
                record=self.record,
                decode_errors=self.decode_errors,
                stats=self.stats,
            )
            return
        import tensorflow_datasets as tfds

        dataset, info = tfds.load(
            self.tfds_name,
            split=self.tfds_split,
            data_dir=self.data_dir,
            with_info=True,
        )
        key = find_text_feature(info.features, self.text_key)
        for example in dataset.as_numpy_iterator():
            raw = example[key]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.stats.invalid_utf8 += 1
                if self.decode_errors == "skip":
                    self.stats.skipped += 1
                    continue
                text = raw.decode("utf-8", errors="replace")
            text = text.strip()
            if text:
                self.stats.records += 1
                self.stats.bytes += len(raw)
                yield text

    def records(self, split):
        """Streams the records of a split.

        Args:
            split: str. `"train"` or `"validation"`.

        Yields:
            str.
        """
        if split not in ("train", "validation"):
            raise ValueError(
                f"Received split={split!r}; expected 'train' or 'validation'."
            )
        if self.validation_files is not None:
            files = self.files if split == "train" else self.validation_files
            yield from self._all_records(files)
            return
        held_out = split == "validation"
        for text in self._all_records(self.files):
            if is_validation(text, self.validation_fraction) == held_out:
                yield text

    def dataset(self, split, repeat=False):
        """Returns a `tf.data.Dataset` of the records of a split.

        Args:
            split: str. `"train"` or `"validation"`.
            repeat: bool. Whether to stream the split again and again.

        Returns:
            A dataset of scalar `tf.string` records.
        """
        dataset = tf.data.Dataset.from_generator(
            lambda: self.records(split),
            output_signature=tf.TensorSpec((), tf.string),
        )
        return dataset.repeat() if repeat else dataset

    def check(self, max_records=100_000):
        """Fails early and clearly when a split has no record.

        Reads at most `max_records` records of each split, then resets
        `stats`.

        Raises:
            ValueError: when the corpus or a split is empty.
        """
        source = self.files or self.tfds_name
        if next(iter(self.records("train")), None) is None:
            raise ValueError(
                f"The corpus {source!r} has no training text record; "
                "expected non-empty text files."
            )
        if self.validation_files is not None:
            found = next(iter(self.records("validation")), None) is not None
        else:
            found = False
            for count, text in enumerate(self._all_records(self.files)):
                if is_validation(text, self.validation_fraction):
                    found = True
                if found or count >= max_records:
                    break
        self.stats = CorpusStats()
        if not found:
            raise ValueError(
                f"The corpus {source!r} gives no validation record; "
                "expected --validation-files or a larger "
                f"--validation-fraction than {self.validation_fraction}."
            )


def train_vocabulary(
    texts, vocabulary_size, lowercase=True, max_records=200_000
):
    """Learns a WordPiece vocabulary with keras-hub.

    Args:
        texts: iterable of str or a `tf.data.Dataset` of strings. Only the
            first `max_records` records are read.
        vocabulary_size: int. Largest number of tokens, special tokens
            included.
        lowercase: bool. Whether the text is lowercased first.
        max_records: int. Number of records the vocabulary is learnt from.

    Returns:
        list of str, `SPECIAL_TOKENS` first (`[PAD]` is id 0).

    Raises:
        ValueError: when `texts` is empty or the size is too small.
    """
    import keras_hub

    if vocabulary_size <= len(SPECIAL_TOKENS):
        raise ValueError(
            f"Received vocabulary_size={vocabulary_size}; expected more than "
            f"the {len(SPECIAL_TOKENS)} special tokens {SPECIAL_TOKENS}."
        )
    if isinstance(texts, tf.data.Dataset):
        sample = texts.take(max_records)
    else:
        sample_list = []
        for text in texts:
            sample_list.append(text)
            if len(sample_list) >= max_records:
                break
        if not sample_list:
            raise ValueError(
                "Received an empty corpus; expected text to learn a "
                "vocabulary from."
            )
        sample = tf.data.Dataset.from_tensor_slices(sample_list)
    vocabulary = keras_hub.tokenizers.compute_word_piece_vocabulary(
        sample.batch(1024),
        vocabulary_size,
        lowercase=lowercase,
        reserved_tokens=list(SPECIAL_TOKENS),
    )
    if len(vocabulary) <= len(SPECIAL_TOKENS):
        raise ValueError(
            "Received an empty corpus; expected text to learn a vocabulary "
            "from."
        )
    return vocabulary


def save_vocabulary(vocabulary, path):
    """Writes a vocabulary, one token per line, atomically."""
    temporary = f"{path}.tmp"
    with open(temporary, "w", encoding="utf-8") as file:
        file.writelines(f"{token}\n" for token in vocabulary)
    os.replace(temporary, path)


def load_vocabulary(path):
    """Reads and checks a WordPiece vocabulary file.

    Args:
        path: str. A file with one token per line.

    Returns:
        list of str.

    Raises:
        ValueError: when `[PAD]` is not the first token, a special token is
            missing or a token is repeated.
    """
    with open(path, encoding="utf-8") as file:
        vocabulary = [line.rstrip("\n") for line in file]
    if not vocabulary or vocabulary[0] != PAD:
        first = vocabulary[0] if vocabulary else None
        raise ValueError(
            f"The vocabulary {path!r} starts with {first!r}; expected "
            f"{PAD!r} as token 0, the id the models mask."
        )
    missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
    if missing:
        raise ValueError(
            f"The vocabulary {path!r} lacks the special tokens {missing}; "
            f"expected all of {SPECIAL_TOKENS}."
        )
    if len(set(vocabulary)) != len(vocabulary):
        seen, repeated = set(), []
        for token in vocabulary:
            if token in seen:
                repeated.append(token)
            seen.add(token)
        raise ValueError(
            f"The vocabulary {path!r} repeats the tokens {repeated[:10]}; "
            "expected each token once."
        )
    return vocabulary


def make_tokenizer(vocabulary, lowercase=True, special_tokens_in_strings=False):
    """Returns a keras-hub `WordPieceTokenizer` over a vocabulary.

    Args:
        vocabulary: list of str or the path of a vocabulary file.
        lowercase: bool. Whether the text is lowercased first; as when the
            vocabulary was learnt.
        special_tokens_in_strings: bool. Whether special tokens written in
            a string, such as `"[MASK]"`, become their ids (for demos: it
            makes the tokenizer slower to trace). Defaults to `False`.
    """
    import keras_hub

    if isinstance(vocabulary, str):
        vocabulary = load_vocabulary(vocabulary)
    return keras_hub.tokenizers.WordPieceTokenizer(
        vocabulary=vocabulary,
        lowercase=lowercase,
        oov_token=UNK,
        special_tokens=list(SPECIAL_TOKENS),
        special_tokens_in_strings=special_tokens_in_strings,
        dtype="int32",
    )


def special_ids(tokenizer):
    """Returns a dict from special token to its id in `tokenizer`."""
    return {token: tokenizer.token_to_id(token) for token in SPECIAL_TOKENS}


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

    Args:
        texts: `tf.data.Dataset` of scalar strings.
        tokenizer: a `make_tokenizer` WordPiece tokenizer.
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
        dict of `"token_ids"` `(batch, sequence_length)` and
        `"mask_positions"` `(batch, max_predictions)`, `labels` the
        original ids at those positions and `sample_weights` 1 where a
        position is real, 0 where it is filler.
    """
    masker = _mask_generator(
        tokenizer, sequence_length, mask_rate, max_predictions
    )
    sequences = _packed_sequences(texts, tokenizer, sequence_length)
    if shuffle_buffer:
        sequences = sequences.shuffle(shuffle_buffer, seed=seed)
    dataset = sequences.batch(batch_size)
    dataset = dataset.map(
        lambda batch: _masked_batch(masker, batch),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


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
    `ceil(mask_rate * maskable tokens)` positions, at most
    `max_predictions`, drawn uniformly; of those 80 % `[MASK]`, 10 % a
    random token, 10 % unchanged), but with a numpy generator seeded by
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
    sequences = _packed_sequences(texts, tokenizer, sequence_length)
    dataset = None
    for batch in sequences.batch(batch_size).take(max_batches):
        masked = _numpy_masked_batch(
            batch.numpy(),
            rng,
            tokenizer.vocabulary_size(),
            ids[MASK],
            [ids[PAD], ids[CLS], ids[SEP]],
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
    unselectable,
    mask_rate,
    max_predictions,
):
    tokens = sequences.astype("int32")
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
    inputs = {"token_ids": tokens, "mask_positions": positions}
    return inputs, labels, weights


def _mask_generator(tokenizer, sequence_length, mask_rate, max_predictions):
    import keras_hub

    ids = special_ids(tokenizer)
    return keras_hub.layers.MaskedLMMaskGenerator(
        vocabulary_size=tokenizer.vocabulary_size(),
        mask_selection_rate=mask_rate,
        mask_token_id=ids[MASK],
        mask_selection_length=max_predictions
        or default_max_predictions(sequence_length, mask_rate),
        unselectable_token_ids=[ids[PAD], ids[CLS], ids[SEP]],
    )


def _masked_batch(masker, sequences):
    masked = masker(sequences)
    inputs = {
        "token_ids": masked["token_ids"],
        "mask_positions": tf.cast(masked["mask_positions"], tf.int32),
    }
    labels = tf.cast(masked["mask_ids"], tf.int32)
    return inputs, labels, tf.cast(masked["mask_weights"], tf.float32)


def _packed_sequences(texts, tokenizer, sequence_length):
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
        A dataset of `(token_ids, labels, sample_weights)`, each
        `(batch, sequence_length)`; the weights are 0 where the label is
        `[PAD]`.
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
        labels = batch[:, 1:]
        weights = tf.cast(tf.not_equal(labels, ids[PAD]), tf.float32)
        return batch[:, :-1], labels, weights

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
