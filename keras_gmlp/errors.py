"""The package's own error, and how the command reports errors.

`KerasGMLPError` is a `ValueError`: a bad value, file or flag, named in a
one-line message with what was expected. The `keras-gmlp` command prints
it, and the other errors a user can cause (a missing or unreadable file,
a file that is not what it should be), as one line in argparse's form,
`keras-gmlp: error: ...`, with exit status 2 (`error_line`).
"""


class KerasGMLPError(ValueError):
    """A bad value, file or flag; the message names it and what was
    expected."""


def error_line(error):
    """The one-line message of `error`, as the command prints it.

    An `OSError` about a file reads `PATH: what went wrong`; any other
    error is its message with its line breaks and runs of spaces folded.

    Args:
        error: an `Exception`.

    Returns:
        A str without line breaks.
    """
    if isinstance(error, OSError) and error.filename is not None:
        reason = error.strerror or type(error).__name__
        text = f"{error.filename}: {reason}"
        if error.filename2 is not None:
            text = f"{error.filename} -> {error.filename2}: {reason}"
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())


def check_skipped(source, skipped, total, reason, expected, allow=False):
    """Stops when more than half of the records of `source` were skipped.

    Args:
        source: str. The file, folder or dataset read.
        skipped: int. Its records skipped (or unusable).
        total: int. Its records read.
        reason: str. Why records are skipped, e.g. `"invalid UTF-8"`.
        expected: str. What the data should be, e.g. `"text files"`.
        allow: bool. Whether to accept it (`--allow-skipped`). Defaults
            to `False`.

    Raises:
        KerasGMLPError: naming `source` and the counts, unless `allow`.
    """
    if allow or skipped * 2 <= total:
        return
    raise KerasGMLPError(
        f"{source}: {skipped:,} of {total:,} records skipped ({reason}): "
        f"expected {expected}; pass --allow-skipped to train on the rest."
    )
