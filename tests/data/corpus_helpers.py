"""Small text corpora for the data tests."""

import random

WORDS = (
    "the cat sat on a mat while dog ran in park big small red blue house "
    "tree bird flew over river under bridge quickly slowly"
).split()


def write_lines(path, count, seed=0, words_per_line=(4, 16)):
    """Writes `count` random lines of `WORDS`; returns them."""
    rng = random.Random(seed)
    lines = [
        " ".join(rng.choices(WORDS, k=rng.randint(*words_per_line)))
        for _ in range(count)
    ]
    with open(path, "w") as file:
        file.write("\n".join(lines) + "\n")
    return lines
