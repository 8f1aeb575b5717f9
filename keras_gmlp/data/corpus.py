"""Text corpora as streams of records, with a held-out split by hash.

`TextCorpus` streams records (lines or blank-line separated paragraphs)
from plain-text files matched by glob patterns, or the strings of a
tensorflow-datasets dataset. Files are read one record at a time, never
whole. Bytes that are not valid UTF-8 are replaced (or the record is
skipped) and counted in `TextCorpus.stats`.

A deterministic hash of each record decides its split (`is_validation`),
so a held-out record never reaches training, whatever the order, the
number of epochs or duplicates in the corpus.

This module imports TensorFlow: import it explicitly
(`from keras_gmlp.data import corpus`), never from `keras_gmlp`.
"""

import glob
import hashlib
import os

import tensorflow as tf

from keras_gmlp.errors import KerasGMLPError
from keras_gmlp.errors import check_skipped

RECORD_MODES = ("line", "paragraph")
DECODE_ERRORS = ("replace", "skip")
HASH_BUCKETS = 1_000_000
# Bytes after which a record is cut (`read_text_records`).
MAX_RECORD_CHARS = 100_000
# Records `TextCorpus.check` reads at least (all of a smaller corpus).
CHECK_RECORDS = 10_000


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
    max_record_chars=MAX_RECORD_CHARS,
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
    >>> from keras_gmlp.data.corpus import TextCorpus
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
        self.patterns = files
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
        self.max_record_chars = MAX_RECORD_CHARS
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
                max_record_chars=self.max_record_chars,
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

    def source(self):
        """The corpus as its error messages name it: a file, the glob
        patterns or the tfds name."""
        if self.files is None:
            return self.tfds_name
        if len(self.files) == 1:
            return self.files[0]
        if isinstance(self.patterns, str):
            return self.patterns
        return ",".join(self.patterns)

    def check(self, max_records=100_000, allow_skipped=False):
        """Fails early and clearly on a corpus that cannot be trained on.

        Reads the records until it has found a training and a held-out one
        and read `CHECK_RECORDS` (or all of them), at most `max_records`,
        then resets `stats`.

        Args:
            max_records: int. Records read at most. Defaults to `100_000`.
            allow_skipped: bool. Whether to accept a corpus of which more
                than half of the records read are not valid UTF-8 (such
                as a binary file). Defaults to `False`.

        Raises:
            KerasGMLPError: when the corpus or a split is empty, or most
                of its records are not valid UTF-8 (unless
                `allow_skipped`).
        """
        source = self.source()
        self.stats = CorpusStats()
        found = {"train": 0, "validation": 0}
        for count, text in enumerate(self._all_records(self.files), 1):
            held_out = self.validation_files is None and is_validation(
                text, self.validation_fraction
            )
            found["validation" if held_out else "train"] += 1
            enough = count >= CHECK_RECORDS and all(found.values())
            if enough or count >= max_records:
                break
        stats = self.stats
        check_skipped(
            source,
            stats.invalid_utf8,
            stats.records + stats.skipped,
            "invalid UTF-8",
            "text files",
            allow_skipped,
        )
        cut = (
            f"; a record is at most {self.max_record_chars:,} bytes, longer "
            f"ones were cut ({stats.truncated:,} cuts)"
            if stats.truncated
            else ""
        )
        if not found["train"]:
            raise KerasGMLPError(
                f"The corpus {source!r} has no training text record{cut}; "
                "expected non-empty text files."
            )
        if self.validation_files is not None:
            found["validation"] = int(
                next(iter(self.records("validation")), None) is not None
            )
        read = stats.records
        self.stats = CorpusStats()
        if not found["validation"]:
            raise KerasGMLPError(
                f"The corpus {source!r} gives no validation record among "
                f"the {read:,} records read{cut}; expected "
                "--validation-files or a larger --validation-fraction than "
                f"{self.validation_fraction}."
            )
