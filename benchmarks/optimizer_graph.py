"""TensorFlow's first training step and its memory: Keras' AdamW against
`FusedAdamW`, the optimizer built while or before the step is traced.

Issue 12 (peak training memory <= timm's). Three forms, each in its own
process, alternated over rounds, with timm's peak (`memory.py`'s timm
worker) measured in each round:
- `keras_traced`: Keras' `AdamW`, built while the first step is traced
  (Keras' TensorFlow trainer without a strategy; the package before
  stop 52).
- `keras_built`: Keras' `AdamW`, built before
  (`keras_gmlp.training.optimizers.build_optimizer_before_tracing`).
- `fused`: `keras_gmlp.training.FusedAdamW`, built before (the package's
  tasks and training jobs since stop 52).

Per form: the training step's graph nodes (the step traced once more at
the end), the first step's seconds, the peak RSS growth over the built
model after two steps (`memory.py`'s "first steps"), and the median of
`--steps` further steps' seconds.

Found (gMLP-Ti/16, batch 32, float32, an idle 2-core AMD EPYC with
AVX-512, scratch, before this script): the step traced to 22,422 nodes,
13,773 of them Keras' AdamW (about 45 a variable: casts, the
bias-correction powers, four element-wise passes, three assignments;
and its weight decay evaluates the learning rate once a variable). With
the optimizer built while the first step is traced, `tf.function`
traces the step twice (once creating the variables) and keeps both: the
first step took 27 s and the RSS rose 3.0 GB over the built model.
Built before: 16 s, 2.6 GB. `FusedAdamW` on top: 10,808 nodes, 9 s,
2.4 GB. TensorFlow's graph costs about 25-45 KB of RSS a node (the
Python graph, the C++ graph with its shape inference, the function
library and the instantiated executor); a plain SGD step (9,876 nodes)
traced in 3.5 s.

Measured: see `benchmarks/README.md`, "Stop 52".

Usage:
    KERAS_BACKEND=tensorflow python benchmarks/optimizer_graph.py \\
        --models gmlp_ti16_224 --batch-size 32 --rounds 3
Results: benchmarks/results/optimizer_graph_<model><suffix>_tensorflow.json
"""

import argparse
import collections
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402
from benchmarks import memory  # noqa: E402

FORMS = ("keras_traced", "keras_built", "fused")
BASELINE = "keras_traced"


def graph_nodes(model, images, labels):
    """`(all, optimizer's)` node counts of the model's training step."""
    import tensorflow as tf

    data = (tf.constant(images), tf.constant(labels))
    graph = tf.function(model.train_step).get_concrete_function(data).graph
    counts = collections.Counter(
        op.name.split("/")[0] == model.optimizer.name
        for op in graph.get_operations()
    )
    return counts[True] + counts[False], counts[True]


def worker(args):
    """In a fresh process: the form's first steps, peak and steady step."""
    common.configure_threads(args.threads, args.share_cores)
    import keras

    from keras_gmlp.models import gmlp_task
    from keras_gmlp.training import FusedAdamW

    optimizer = keras.optimizers.AdamW(learning_rate=1e-3)
    if args.form == "fused":
        optimizer = FusedAdamW(learning_rate=1e-3)
    model = common.build_image_classifier(
        args.model, args.image_size, "auto", args.precision, optimizer
    )
    images, labels = common.random_image_batch(args.batch_size, args.image_size)
    built_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    no_op = (lambda model: None) if args.form == "keras_traced" else None
    with common.patched(
        gmlp_task,
        "build_optimizer_before_tracing",
        no_op or gmlp_task.build_optimizer_before_tracing,
    ):
        start = time.perf_counter()
        model.train_on_batch(images, labels)
        first_step_s = time.perf_counter() - start
        model.train_on_batch(images, labels)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step_s = common.median_step_seconds(
        lambda: model.train_on_batch(images, labels), args.steps
    )
    nodes, optimizer_nodes = graph_nodes(model, images, labels)
    print(
        json.dumps(
            {
                "first_step_s": first_step_s,
                "step_peak_mib": (peak_kib - built_kib) / 1024,
                "peak_mib": peak_kib / 1024,
                "step_s": step_s,
                "graph_nodes": nodes,
                "optimizer_nodes": optimizer_nodes,
            }
        )
    )


def measure(args, model, form):
    command = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        form,
        "--worker-model",
        model,
        "--batch-size",
        str(args.batch_size),
        "--image-size",
        str(args.image_size),
        "--threads",
        str(args.threads),
        "--steps",
        str(args.steps),
        "--precision",
        args.precision,
    ] + (["--share-cores"] if args.share_cores else [])
    answer = common.run_json(command, common.worker_env("tensorflow", 2))
    print(form, answer, flush=True)
    return answer


def rows_for(args, model):
    """Every form's medians over the rounds, against `BASELINE` and timm."""
    answers = {form: [] for form in FORMS}
    timm_peaks = []
    for round_index in range(args.rounds):
        order = FORMS if round_index % 2 == 0 else FORMS[::-1]
        for form in order:
            answers[form].append(measure(args, model, form))
        _, timm_step_peak, _ = memory.summarise(
            memory.timm_measurement(timm_arguments(args), model)
        )
        timm_peaks.append(timm_step_peak)
    timm_step_peak = common.median(timm_peaks)
    rows = []
    for form in FORMS:
        done = [a for a in answers[form] if "error" not in a]
        if not done:
            rows.append({"model": model, "form": form, "error": "failed"})
            continue

        def middle(key, answers=done):
            return common.median([a[key] for a in answers])

        speed = [
            b["step_s"] / a["step_s"]
            for a, b in zip(answers[form], answers[BASELINE], strict=True)
            if "error" not in a and "error" not in b
        ]
        rows.append(
            {
                "model": model,
                "form": form,
                "graph_nodes": middle("graph_nodes"),
                "optimizer_nodes": middle("optimizer_nodes"),
                "first_step_s": middle("first_step_s"),
                "step_peak_mib": middle("step_peak_mib"),
                "timm_step_peak_mib": timm_step_peak,
                "step_x_timm": memory.ratio(
                    middle("step_peak_mib"), timm_step_peak
                ),
                "step_ms": 1e3 * middle("step_s"),
                f"speed_x_{BASELINE}": common.median(speed),
                "rounds_min": min(speed),
                "rounds_max": max(speed),
            }
        )
    return rows


def timm_arguments(args):
    """`memory.timm_measurement`'s arguments: two steps, as the forms."""
    return argparse.Namespace(
        timm_python=args.timm_python,
        batch_size=args.batch_size,
        image_size=args.image_size,
        threads=args.threads,
        steps=2,
        steady_steps=1,
    )


def main():
    parser = common.image_benchmark_parser(__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--precision", default="float32")
    parser.add_argument(
        "--share-cores",
        action="store_true",
        help="keras_gmlp.training.share_cores_between_chains() first, as "
        "the image jobs do",
    )
    parser.add_argument("--worker", choices=FORMS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        args.form = args.worker
        worker(args)
        return
    common.require_backend("tensorflow", "the trace measured is TensorFlow's")
    run = common.header()
    rows = []
    for model in args.models:
        rows += rows_for(args, model)
        name = f"optimizer_graph_{model}{args.suffix}_{run['backend']}"
        common.finish_report(
            run,
            [r for r in rows if r["model"] == model],
            [
                "model",
                "form",
                "graph_nodes",
                "optimizer_nodes",
                "first_step_s",
                "step_peak_mib",
                "step_x_timm",
                "step_ms",
                f"speed_x_{BASELINE}",
                "rounds_min",
                "rounds_max",
            ],
            name,
            arguments=vars(args),
        )


if __name__ == "__main__":
    main()
