"""Small text corpora and labelled tasks for the tests."""

import csv
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


# Without "cat" and "dog": those are the labels, and each row has its own.
TASK_WORDS = (
    "the sat on a mat while ran in park big small red blue house tree "
    "flew over river under bridge quickly slowly"
).split()


def write_task(path, count, seed, delimiter=",", pairs=False):
    """A task a model can learn: label 'cat' rows contain the word cat."""
    rng = random.Random(seed)
    with open(path, "w", newline="") as file:
        writer = csv.writer(file, delimiter=delimiter)
        writer.writerow(
            ["text", "text_b", "label"] if pairs else ["text", "label"]
        )
        for _ in range(count):
            label = rng.choice(["cat", "dog"])
            words = rng.choices(TASK_WORDS, k=6) + [label]
            rng.shuffle(words)
            row = [" ".join(words)]
            if pairs:
                row.append(" ".join(rng.choices(TASK_WORDS, k=3)))
            writer.writerow([*row, label])
