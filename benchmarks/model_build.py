"""A/B: building a model under JAX with Keras' draws (`jax.random`, one
compilation per shape) vs through one compilation per distribution
(`keras_gmlp.training.compile_jax_draws_once`); TensorFlow as a reference.

Issue 12, the quick-start's time. Under JAX, building the digits
quick-start's model took 1.7 s against TensorFlow's 0.2 s (stop 62's
`cProfile`, `quickstart.py`'s docstring), nearly all of it XLA compiling
each initializer's `jax.random` draw for its shape (`JAX_LOG_COMPILES=1`:
four `_uniform` and one `_normal`, 0.15-0.8 s each on an idle 2-core AMD
EPYC of family 25; the multi-dimensional shapes the slowest to compile).

Each form builds each model in a fresh process (imports excluded from
the time; Keras' seed set first), the forms alternated within each round;
every worker also hashes its model's initial weights, and the run checks
that both JAX forms drew the same bits. The table gives each form's
median build seconds and its seconds over the baseline's (Keras' draws)
in the same rounds: below 1 is faster.

Usage:
    python benchmarks/model_build.py --rounds 5
Results: benchmarks/results/model_build<suffix>.json
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BASELINE = "jax_keras_draws"
# form -> (backend, environment overrides)
FORMS = {
    BASELINE: ("jax", {"KERAS_GMLP_JAX_DRAWS": "0"}),
    "jax_compiled_once": ("jax", {}),
    "tensorflow": ("tensorflow", {}),
}
MODELS = ("digits", "gmlp_s16_224", "gmlp_tiny")


def build(model_name):
    """Builds `model_name` (the digits job's task, or a preset without its
    weights); returns its weights."""
    if model_name == "digits":
        return common.digits_job_task().weights
    if model_name.startswith("gmlp_tiny"):
        from keras_gmlp.models import GMLPMaskedLM

        return GMLPMaskedLM.from_preset(model_name, load_weights=False).weights
    from keras_gmlp.models import GMLPImageClassifier

    model = GMLPImageClassifier.from_preset(model_name, load_weights=False)
    return model.weights


def worker(model_name):
    """Run in a fresh process: prints `{"seconds", "weights_hash"}`."""
    import keras

    import keras_gmlp.models  # noqa: F401 (imports outside the time)
    from keras_gmlp.training import compile_jax_draws_once
    from keras_gmlp.workflows import image_classification  # noqa: F401

    compile_jax_draws_once()
    keras.utils.set_random_seed(0)
    started = time.perf_counter()
    weights = build(model_name)
    seconds = time.perf_counter() - started
    digest = hashlib.sha256()
    for weight in weights:
        digest.update(keras.ops.convert_to_numpy(weight.value).tobytes())
    print(json.dumps({"seconds": seconds, "weights_hash": digest.hexdigest()}))


def run_form(form, model_name):
    backend, overrides = FORMS[form]
    env = common.worker_env(backend, None)
    env.pop("KERAS_GMLP_JAX_DRAWS", None)
    env.update(overrides)
    output = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", model_name],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument(
        "--suffix", default="", help="results file: model_build<suffix>.json"
    )
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return
    runs = {model: {form: [] for form in FORMS} for model in args.models}
    for round_index in range(args.rounds):
        for model in args.models:
            for form in FORMS:
                measured = run_form(form, model)
                runs[model][form].append(measured)
                print(
                    f"round {round_index} {model:14s} {form:18s} "
                    f"{measured['seconds']:6.2f} s",
                    flush=True,
                )
    rows = []
    for model, forms in runs.items():
        baseline = forms[BASELINE]
        hashes = {
            form: {r["weights_hash"] for r in forms[form]} for form in FORMS
        }
        same_bits = hashes[BASELINE] == hashes["jax_compiled_once"]
        if not same_bits or len(hashes[BASELINE]) != 1:
            raise SystemExit(f"{model}: the JAX forms drew different weights")
        for form, measured in forms.items():
            ratios = [
                run["seconds"] / base["seconds"]
                for run, base in zip(measured, baseline, strict=True)
            ]
            rows.append(
                {
                    "model": model,
                    "form": form,
                    "build_seconds": common.median(
                        [run["seconds"] for run in measured]
                    ),
                    f"x_{BASELINE}": common.median(ratios),
                    "range": f"{min(ratios):.2f}-{max(ratios):.2f}",
                }
            )
    common.print_table(
        rows, ["model", "form", "build_seconds", f"x_{BASELINE}", "range"]
    )
    report = common.header(with_backend=False)
    report.update({"arguments": vars(args), "rows": rows, "runs": runs})
    common.write_results(f"model_build{args.suffix}", report)


if __name__ == "__main__":
    main()
