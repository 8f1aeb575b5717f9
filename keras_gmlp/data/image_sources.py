"""Image classification sources: uint8 images and int32 labels as tf.data.

`load_images(name, data_dir)` finds and reads a dataset:

- `"digits"`: scikit-learn's bundled 8 x 8 handwritten digits (1,797
  images), with a fixed stratified held-out split of 360 images. Offline.
- `"cifar10"`, `"cifar100"`: the python pickle batches (`data_batch_1..5`,
  `test_batch`; `train`, `test` for CIFAR-100) or the binary records
  (`data_batch_*.bin`, `test_batch.bin`; `train.bin`, `test.bin`) in
  `data_dir` or its usual sub-folder, or the original `.tar.gz` archive
  there; otherwise tensorflow-datasets with `data_dir` (a manually placed
  archive goes in `data_dir/downloads/manual/`).
- `"imagenet2012"`: `data_dir/train/<class>/*.JPEG` and
  `data_dir/{val,validation}/<class>/*.JPEG`, or sharded TFRecords
  `data_dir/train-*` and `data_dir/validation-*` holding `image/encoded`
  and `image/class/label` (1-based labels, as written by the usual
  ImageNet-to-TFRecord scripts); otherwise tensorflow-datasets, which
  needs `ILSVRC2012_img_train.tar` and `ILSVRC2012_img_val.tar` in
  `data_dir/downloads/manual/`.
- `"folder:PATH"`: any folder of class sub-folders of images; with
  `PATH/train` and `PATH/{validation,val,test}` sub-folders they are the
  splits, else every 10th image of each class is held out. A folder of
  one class is refused.
- `"tfds:NAME"`: any tensorflow-datasets image classification dataset
  with `image` and `label` features, such as `tfds:mnist`: its `train`
  split, and its `validation` split (else `test`) held out.

Each split yields `(image, label)` pairs: a uint8 image `(height, width,
channels)` at its stored size and an int32 label. An image that does not
decode (corrupt or empty file, bad record) is skipped and counted, never a
crash: see `SkipCounter`. `keras_gmlp.data.images.batches` turns a split
into the training or evaluation pipeline.
"""

import dataclasses
import glob
import os
import pickle
import socket
import tarfile

import numpy as np
import tensorflow as tf

from keras_gmlp.errors import KerasGMLPError
from keras_gmlp.errors import check_skipped

DIGITS_VALIDATION_SIZE = 360
DIGITS_SPLIT_SEED = 0
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
IMAGENET_SIZES = {"train": 1281167, "validation": 50000}
CIFAR = {
    "cifar10": {
        "num_classes": 10,
        "pickle_folder": "cifar-10-batches-py",
        "binary_folder": "cifar-10-batches-bin",
        "pickle_archive": "cifar-10-python.tar.gz",
        "binary_archive": "cifar-10-binary.tar.gz",
        "pickle": (
            [f"data_batch_{i}" for i in range(1, 6)],
            ["test_batch"],
        ),
        "binary": (
            [f"data_batch_{i}.bin" for i in range(1, 6)],
            ["test_batch.bin"],
        ),
        "label_key": b"labels",
        "label_bytes": 1,
        "label_index": 0,
    },
    "cifar100": {
        "num_classes": 100,
        "pickle_folder": "cifar-100-python",
        "binary_folder": "cifar-100-binary",
        "pickle_archive": "cifar-100-python.tar.gz",
        "binary_archive": "cifar-100-binary.tar.gz",
        "pickle": (["train"], ["test"]),
        "binary": (["train.bin"], ["test.bin"]),
        "label_key": b"fine_labels",
        "label_bytes": 2,
        "label_index": 1,
    },
}
DATASETS = (
    "digits",
    "cifar10",
    "cifar100",
    "imagenet2012",
    "folder:PATH",
    "tfds:NAME",
)
TFDS_HOSTS = {
    "cifar10": "www.cs.toronto.edu",
    "cifar100": "www.cs.toronto.edu",
}


class DataError(KerasGMLPError):
    """Missing, empty or malformed data, with where it was looked for."""


class SkipCounter:
    """Counts the records of a split that failed to decode and were skipped.

    Two counters live in the input pipeline: records attempted and records
    decoded. Their difference is the number skipped. It is exact whenever
    the pipeline has finished its passes (e.g. at the end of an epoch that
    reads the whole split); in the middle of a pass, records being decoded
    count as skipped until they are done.

    Args:
        name: str. Name of the split, for reports.
    """

    def __init__(self, name):
        self.name = name
        self.attempted = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.decoded = tf.Variable(0, dtype=tf.int64, trainable=False)

    def count_attempt(self, *record):
        self.attempted.assign_add(1)
        return record

    def count_decoded(self, image, label):
        with tf.control_dependencies([self.decoded.assign_add(1)]):
            return tf.identity(image), tf.identity(label)

    @property
    def skipped(self):
        """Records skipped so far."""
        return int(self.attempted.numpy() - self.decoded.numpy())

    def __repr__(self):
        return f"SkipCounter({self.name!r}, skipped={self.skipped})"


@dataclasses.dataclass
class ImageDataset:
    """A loaded image dataset: its splits and what is known about them.

    Attributes:
        name: str. The dataset name given to `load_images`.
        source: str. Where the data came from (tfds, files, sklearn).
        train: `tf.data.Dataset` of `(uint8 image, int32 label)`.
        validation: `tf.data.Dataset` of `(uint8 image, int32 label)`.
        num_train: int. Records in the training split.
        num_validation: int. Records in the held-out split.
        num_classes: int.
        num_channels: int.
        image_size: `(height, width)` of the stored images, or `None` when
            they vary (files, ImageNet).
        class_names: list of str, or `None`.
        skip_counters: dict of split name to `SkipCounter`; empty for
            sources that cannot hold corrupt records.
    """

    name: str
    source: str
    train: tf.data.Dataset
    validation: tf.data.Dataset
    num_train: int
    num_validation: int
    num_classes: int
    num_channels: int
    image_size: tuple = None
    class_names: list = None
    skip_counters: dict = dataclasses.field(default_factory=dict)

    def skipped(self):
        """Skipped (corrupt) records per split, `{"train": 0, ...}`."""
        return {
            split: counter.skipped
            for split, counter in self.skip_counters.items()
        }

    def check_skipped(self, allow=False):
        """Stops when more than half of a split's records were skipped.

        Call it after a pass over each split (the end of the first
        epoch): the counts are exact then.

        Args:
            allow: bool. Whether to accept it (`--allow-skipped`).
                Defaults to `False`.

        Raises:
            KerasGMLPError: naming the source, the split and the counts.
        """
        for split, counter in self.skip_counters.items():
            check_skipped(
                f"{self.source} ({split})",
                counter.skipped,
                int(counter.attempted.numpy()),
                "not decodable as images",
                "JPEG, PNG, BMP or GIF files",
                allow,
            )

    def split(self, name):
        """Returns the `"train"` or `"validation"` dataset."""
        if name not in ("train", "validation"):
            raise ValueError(
                f"Unknown split {name!r}; expected 'train' or 'validation'."
            )
        return self.train if name == "train" else self.validation

    def size(self, name):
        """Number of records of the `"train"` or `"validation"` split."""
        self.split(name)
        return self.num_train if name == "train" else self.num_validation


def load_images(name, data_dir=None, label_offset=None):
    """Loads an image dataset by name; see the module docstring.

    Args:
        name: str. `"digits"`, `"cifar10"`, `"cifar100"`,
            `"imagenet2012"`, `"folder:PATH"` or `"tfds:NAME"`.
        data_dir: str or `None`. Folder of local files, or the
            tensorflow-datasets data folder. Defaults to tfds' own
            (`~/tensorflow_datasets`).
        label_offset: int or `None`. Subtracted from TFRecord labels.
            Defaults to 1 for ImageNet TFRecords, whose labels are 1..1000.

    Returns:
        An `ImageDataset`.

    Raises:
        ValueError: for an unknown name.
        DataError: for missing, empty or malformed files, naming where the
            files were expected.

    Example:

    >>> from keras_gmlp.data.image_sources import load_images
    >>> data = load_images("digits")
    >>> data.num_train, data.num_validation, data.num_classes
    (1437, 360, 10)
    """
    if name == "digits":
        return _load_digits()
    if name in CIFAR:
        local = _find_cifar_files(name, data_dir)
        if local is not None:
            return _load_cifar_files(name, *local)
        return _load_tfds(name, data_dir)
    if name == "imagenet2012":
        if data_dir and _has_class_folders(data_dir, "train"):
            return _load_folder(name, data_dir)
        if data_dir and glob.glob(os.path.join(data_dir, "train-*")):
            offset = 1 if label_offset is None else label_offset
            return _load_imagenet_tfrecords(data_dir, offset)
        return _load_tfds(name, data_dir)
    if name.startswith("folder:"):
        return _load_folder(name, name[len("folder:") :])
    if name.startswith("tfds:"):
        return _load_tfds(name[len("tfds:") :], data_dir)
    raise ValueError(
        f"Unknown dataset {name!r}; expected one of {list(DATASETS)}."
    )


# --- digits ------------------------------------------------------------------


def _load_digits():
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    # 0..16 grey levels -> 0..255, one channel.
    images = np.round(digits.images * (255 / 16)).astype("uint8")[..., None]
    labels = digits.target.astype("int32")
    x_train, x_val, y_train, y_val = train_test_split(
        images,
        labels,
        test_size=DIGITS_VALIDATION_SIZE,
        stratify=labels,
        random_state=DIGITS_SPLIT_SEED,
    )
    return ImageDataset(
        name="digits",
        source="sklearn.datasets.load_digits",
        train=tf.data.Dataset.from_tensor_slices((x_train, y_train)),
        validation=tf.data.Dataset.from_tensor_slices((x_val, y_val)),
        num_train=len(y_train),
        num_validation=len(y_val),
        num_classes=10,
        num_channels=1,
        image_size=(8, 8),
        class_names=[str(i) for i in range(10)],
    )


# --- CIFAR files -------------------------------------------------------------


def _find_cifar_files(name, data_dir):
    """Returns `(kind, folder)` of local CIFAR files, or `None`."""
    if not data_dir or not os.path.isdir(data_dir):
        return None
    spec = CIFAR[name]
    for kind, folder_name, archive in (
        ("pickle", spec["pickle_folder"], spec["pickle_archive"]),
        ("binary", spec["binary_folder"], spec["binary_archive"]),
    ):
        train_files, _ = spec[kind]
        for folder in (data_dir, os.path.join(data_dir, folder_name)):
            if os.path.exists(os.path.join(folder, train_files[0])):
                return kind, folder
        archive_path = os.path.join(data_dir, archive)
        if os.path.exists(archive_path):
            _extract(archive_path, data_dir)
            return kind, os.path.join(data_dir, folder_name)
    return None


def _extract(archive_path, data_dir):
    try:
        with tarfile.open(archive_path) as archive:
            archive.extractall(data_dir, filter="data")
    except (tarfile.TarError, OSError, EOFError) as error:
        raise DataError(
            f"Cannot extract {archive_path}: {error}. Replace it with the "
            "original archive."
        ) from error


def _load_cifar_files(name, kind, folder):
    spec = CIFAR[name]
    train_files, test_files = spec[kind]
    splits = []
    for files in (train_files, test_files):
        paths = [os.path.join(folder, file) for file in files]
        missing = [path for path in paths if not os.path.exists(path)]
        if missing:
            raise DataError(
                f"{name} {kind} files missing: {missing}. Expected "
                f"{files} in {folder}."
            )
        if kind == "pickle":
            splits.append(_read_cifar_pickles(paths, spec))
        else:
            splits.append(_read_cifar_binaries(paths, spec))
    (train, num_train), (validation, num_validation) = splits
    return ImageDataset(
        name=name,
        source=f"{kind} files in {folder}",
        train=train,
        validation=validation,
        num_train=num_train,
        num_validation=num_validation,
        num_classes=spec["num_classes"],
        num_channels=3,
        image_size=(32, 32),
    )


def _read_cifar_pickles(paths, spec):
    images, labels = [], []
    for path in paths:
        try:
            with open(path, "rb") as file:
                batch = pickle.load(file, encoding="bytes")
        except (pickle.UnpicklingError, EOFError, ValueError) as error:
            raise DataError(
                f"{path} is not a CIFAR python pickle batch ({error})."
            ) from error
        if not isinstance(batch, dict) or b"data" not in batch:
            raise DataError(
                f"{path} has no b'data' entry; expected a CIFAR python "
                "pickle batch."
            )
        data = np.asarray(batch[b"data"])
        if data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise DataError(
                f"{path}: data has shape {data.shape}; expected (N, 3072) "
                "rows of 32 x 32 x 3 images."
            )
        label = np.asarray(batch[spec["label_key"]], dtype="int32")
        if len(label) != len(data):
            raise DataError(
                f"{path}: {len(label)} labels for {len(data)} images."
            )
        _check_labels(label, spec["num_classes"], path)
        # Rows are channel-major (3 x 32 x 32): to (32, 32, 3).
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(label)
    images = np.concatenate(images).astype("uint8")
    labels = np.concatenate(labels)
    return tf.data.Dataset.from_tensor_slices((images, labels)), len(labels)


def _read_cifar_binaries(paths, spec):
    image_bytes = 3 * 32 * 32
    record_bytes = spec["label_bytes"] + image_bytes
    count = 0
    for path in paths:
        size = os.path.getsize(path)
        if size == 0 or size % record_bytes:
            raise DataError(
                f"{path} has {size} bytes, not a positive multiple of the "
                f"{record_bytes}-byte records of {len(spec['binary'][0])}"
                "-file CIFAR binaries."
            )
        count += size // record_bytes
    label_index = spec["label_index"]
    num_classes = spec["num_classes"]

    def decode(record):
        values = tf.io.decode_raw(record, tf.uint8)
        label = tf.cast(values[label_index], tf.int32)
        image = tf.reshape(values[spec["label_bytes"] :], (3, 32, 32))
        tf.debugging.assert_less(
            label, num_classes, message="CIFAR label out of range"
        )
        return tf.transpose(image, (1, 2, 0)), label

    dataset = tf.data.FixedLengthRecordDataset(paths, record_bytes)
    return dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE), count


def _check_labels(labels, num_classes, path):
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise DataError(
            f"{path}: labels span [{labels.min()}, {labels.max()}]; expected "
            f"[0, {num_classes - 1}]."
        )


# --- image folders -----------------------------------------------------------


def _has_class_folders(path, split=None):
    folder = os.path.join(path, split) if split else path
    return os.path.isdir(folder) and any(
        os.path.isdir(os.path.join(folder, entry))
        for entry in os.listdir(folder)
    )


def _list_images(folder, class_names=None):
    """Returns `(paths, labels, class_names)` of a folder of class folders."""
    if class_names is None:
        class_names = sorted(
            entry
            for entry in os.listdir(folder)
            if os.path.isdir(os.path.join(folder, entry))
        )
    paths, labels = [], []
    for label, class_name in enumerate(class_names):
        class_folder = os.path.join(folder, class_name)
        if not os.path.isdir(class_folder):
            continue
        for file in sorted(os.listdir(class_folder)):
            if file.lower().endswith(IMAGE_EXTENSIONS):
                paths.append(os.path.join(class_folder, file))
                labels.append(label)
    return paths, labels, class_names


def _load_folder(name, path):
    if not os.path.isdir(path):
        raise DataError(
            f"Image folder {path} does not exist; expected class "
            f"sub-folders such as {path}/<class name>/<image>.jpg."
        )
    split_folders = {
        split: os.path.join(path, split)
        for split in ("train", "validation", "val", "test")
        if _has_class_folders(os.path.join(path, split))
    }
    held_out = next(
        (
            split_folders[s]
            for s in ("validation", "val", "test")
            if s in split_folders
        ),
        None,
    )
    if "train" in split_folders and held_out:
        train_paths, train_labels, class_names = _list_images(
            split_folders["train"]
        )
        val_paths, val_labels, _ = _list_images(held_out, class_names)
        source = f"image folders {split_folders['train']} and {held_out}"
    else:
        paths, labels, class_names = _list_images(path)
        # Every 10th image of each class is held out.
        position = {}
        train_paths, train_labels, val_paths, val_labels = [], [], [], []
        for image_path, label in zip(paths, labels, strict=True):
            index = position[label] = position.get(label, -1) + 1
            if index % 10 == 9:
                val_paths.append(image_path)
                val_labels.append(label)
            else:
                train_paths.append(image_path)
                train_labels.append(label)
        source = f"image folder {path} (every 10th image held out)"
    if not train_paths:
        raise DataError(
            f"No images found in {path}; expected class sub-folders such "
            f"as {path}/<class name>/<image>.jpg (extensions "
            f"{', '.join(IMAGE_EXTENSIONS)})."
        )
    found = sorted({class_names[label] for label in train_labels})
    if len(found) < 2:
        raise DataError(
            f"{path}: one class ({found[0]!r}); expected image "
            "sub-folders of at least two classes, such as "
            f"{path}/<class name>/<image>.jpg."
        )
    if not val_paths:
        raise DataError(
            f"No held-out images in {path}: add a validation/ folder of "
            "class sub-folders, or at least 10 images per class."
        )
    counters = {
        "train": SkipCounter("train"),
        "validation": SkipCounter("validation"),
    }
    return ImageDataset(
        name=name,
        source=source,
        train=_decoded_files(train_paths, train_labels, counters["train"]),
        validation=_decoded_files(
            val_paths, val_labels, counters["validation"]
        ),
        num_train=len(train_paths),
        num_validation=len(val_paths),
        num_classes=len(class_names),
        num_channels=3,
        class_names=class_names,
        skip_counters=counters,
    )


def _decode_image(encoded):
    image = tf.io.decode_image(encoded, channels=3, expand_animations=False)
    image.set_shape((None, None, 3))
    return image


def _decoded_files(paths, labels, counter):
    dataset = tf.data.Dataset.from_tensor_slices(
        (tf.constant(paths), tf.constant(labels, tf.int32))
    )
    return _decode_with_skips(
        dataset,
        lambda path, label: (_decode_image(tf.io.read_file(path)), label),
        counter,
    )


def _decode_with_skips(dataset, decode, counter):
    """Maps `decode`, skipping and counting the records it fails on."""
    dataset = dataset.map(counter.count_attempt)
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.ignore_errors()
    return dataset.map(counter.count_decoded)


# --- ImageNet TFRecords ------------------------------------------------------


def _load_imagenet_tfrecords(data_dir, label_offset):
    counters = {}
    splits = {}
    sizes = {}
    for split in ("train", "validation"):
        files = sorted(glob.glob(os.path.join(data_dir, f"{split}-*")))
        if not files:
            raise DataError(
                f"No {split} TFRecord shards in {data_dir}; expected files "
                f"{data_dir}/{split}-00000-of-NNNNN."
            )
        empty = [file for file in files if os.path.getsize(file) == 0]
        if len(empty) == len(files):
            raise DataError(
                f"Every {split} TFRecord shard in {data_dir} is empty."
            )
        counters[split] = SkipCounter(split)
        splits[split] = tfrecord_images(
            files, 1000, label_offset, counters[split]
        )
        full = {"train": 1024, "validation": 128}[split]
        if len(files) == full:
            sizes[split] = IMAGENET_SIZES[split]
        else:
            sizes[split] = _count_records(files)
    return ImageDataset(
        name="imagenet2012",
        source=f"TFRecord shards in {data_dir}",
        train=splits["train"],
        validation=splits["validation"],
        num_train=sizes["train"],
        num_validation=sizes["validation"],
        num_classes=1000,
        num_channels=3,
        skip_counters=counters,
    )


def tfrecord_images(files, num_classes, label_offset=0, counter=None):
    """Images of TFRecord files with `image/encoded`, `image/class/label`.

    Records that do not parse or decode, or whose label (minus
    `label_offset`) is outside `[0, num_classes)`, are skipped and counted.

    Args:
        files: list of str. The TFRecord files.
        num_classes: int. Number of classes.
        label_offset: int. Subtracted from the stored labels. Defaults to 0.
        counter: `SkipCounter` or `None`.

    Returns:
        A `tf.data.Dataset` of `(uint8 image, int32 label)`.
    """
    counter = counter or SkipCounter("records")
    features = {
        "image/encoded": tf.io.FixedLenFeature([], tf.string),
        "image/class/label": tf.io.FixedLenFeature([], tf.int64),
    }

    def decode(record):
        example = tf.io.parse_single_example(record, features)
        label = tf.cast(example["image/class/label"], tf.int32) - label_offset
        check = tf.debugging.assert_equal(
            tf.logical_and(label >= 0, label < num_classes),
            True,
            message="label out of range",
        )
        with tf.control_dependencies([check]):
            image = _decode_image(example["image/encoded"])
        return image, label

    dataset = tf.data.TFRecordDataset(
        files, num_parallel_reads=tf.data.AUTOTUNE
    )
    return _decode_with_skips(dataset, decode, counter)


def _count_records(files):
    dataset = tf.data.TFRecordDataset(files).ignore_errors()
    return int(dataset.reduce(np.int64(0), lambda count, _: count + 1))


# --- tensorflow-datasets -----------------------------------------------------


def _load_tfds(name, data_dir):
    import tensorflow_datasets as tfds

    builder = tfds.builder(name, data_dir=data_dir)
    if not builder.is_prepared() and not _tfds_is_mocked(tfds):
        _check_tfds_can_prepare(name, builder)
    held_out = "test"
    if name == "imagenet2012" or "validation" in builder.info.splits:
        held_out = "validation"
    splits = ("train", held_out)
    try:
        train, validation = tfds.load(
            name,
            split=list(splits),
            data_dir=data_dir,
            as_supervised=True,
            shuffle_files=True,
        )
    except Exception as error:  # tfds raises many kinds; name the files.
        raise DataError(
            f"tensorflow-datasets could not load {name} into "
            f"{builder.data_dir}: {error}"
        ) from error
    sizes = [
        builder.info.splits[s].num_examples
        if s in builder.info.splits
        else None
        for s in splits
    ]
    datasets = []
    for dataset, size in zip((train, validation), sizes, strict=True):
        if not size:
            size = int(dataset.reduce(np.int64(0), lambda count, _: count + 1))
        datasets.append((dataset.map(_tfds_cast), size))
    (train, num_train), (validation, num_validation) = datasets
    features = builder.info.features
    if not {"image", "label"} <= set(features):
        raise DataError(
            f"{name}: its features are {sorted(features)}; expected an "
            "image classification dataset with 'image' and 'label'."
        )
    if features["label"].num_classes < 2:
        raise DataError(
            f"{name}: one class ({features['label'].names}); expected at "
            "least two classes."
        )
    shape = features["image"].shape
    return ImageDataset(
        name=name,
        source=f"tensorflow-datasets in {builder.data_dir}",
        train=train,
        validation=validation,
        num_train=num_train,
        num_validation=num_validation,
        num_classes=features["label"].num_classes,
        num_channels=shape[-1] or 3,
        image_size=tuple(shape[:2]) if None not in shape[:2] else None,
        class_names=features["label"].names,
    )


def _tfds_cast(image, label):
    return image, tf.cast(label, tf.int32)


def _tfds_is_mocked(tfds):
    """Whether `tfds.testing.mock_data` is active (no preparation needed)."""
    method = tfds.core.DatasetBuilder.download_and_prepare
    return "mock_data" in getattr(method, "__qualname__", "")


def _check_tfds_can_prepare(name, builder):
    """Fails fast where tfds would retry a download for minutes."""
    manual_dir = os.path.join(
        os.path.dirname(os.path.dirname(builder.data_dir)),
        "downloads",
        "manual",
    )
    if name == "imagenet2012":
        needed = ["ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar"]
        missing = [
            file
            for file in needed
            if not os.path.exists(os.path.join(manual_dir, file))
        ]
        if missing:
            raise DataError(
                f"imagenet2012 is not prepared in {builder.data_dir} and "
                f"{missing} are missing: download them from "
                f"https://image-net.org and put them in {manual_dir}/, or "
                "pass --data-dir with train/ and val/ class folders of "
                "JPEGs, or TFRecord shards train-* and validation-*."
            )
        return
    if name in CIFAR and glob.glob(os.path.join(manual_dir, "cifar*")):
        return
    host = TFDS_HOSTS.get(name)
    if host and not _reachable(host):
        spec = CIFAR[name]
        raise DataError(
            f"{name} is not prepared in {builder.data_dir} and {host} cannot "
            f"be reached (offline?). Put {spec['binary_archive']} in "
            f"{manual_dir}/ for tensorflow-datasets, or pass --data-dir "
            f"with the python batches ({spec['pickle_archive']} or its "
            f"{spec['pickle_folder']}/ folder) or the binary batches."
        )


def _reachable(host, port=443, timeout=3.0):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
