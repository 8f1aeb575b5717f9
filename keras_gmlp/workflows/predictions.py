"""Logits to the `(name, probability)` lists that the commands print."""

import numpy as np


def top_k(logits, names, k=5):
    """The `k` most probable entries of one row of logits.

    Args:
        logits: array-like `(classes,)`.
        names: list of str, a name per class, or `None` for the indices.
        k: int. Entries returned. Defaults to `5`.

    Returns:
        A list of `(name, probability)`, most probable first; the
        probabilities are the softmax over all classes.

    Example:

    >>> from keras_gmlp.workflows.predictions import top_k
    >>> top_k([0.0, 0.0, np.log(2.0)], ["a", "b", "c"], k=2)
    [('c', 0.5), ('a', 0.25)]
    """
    logits = np.asarray(logits, "float64")
    values = np.exp(logits - logits.max())
    probabilities = values / values.sum()
    names = names or [str(index) for index in range(len(probabilities))]
    best = np.argsort(-probabilities, kind="stable")[:k]
    return [(names[i], float(probabilities[i])) for i in best]
