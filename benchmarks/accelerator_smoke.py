"""Does every task train, predict, save and generate on this device?

For each backend (a fresh process each) and each dtype policy
(`float32`, `mixed_bfloat16`, `mixed_float16`), on whatever device the
backend sees (a GPU when there is one, else the CPU):

- image classifier (`gmlp_micro4_32`, uint8 images in): one `fit` step,
  `predict`, save to `.keras` and reload; the reloaded model must predict
  the same logits;
- masked LM (`gmlp_tiny`, 2 blocks, raw strings in): one `fit` step;
- causal LM (`gmlp_tiny`, causal, 2 blocks): `generate` with the decoding
  cache.

Every loss and output must be finite. Prints a table of what ran on which
device and exits non-zero if any case failed. A few minutes on a CPU.

Usage:
    python benchmarks/accelerator_smoke.py
    python benchmarks/accelerator_smoke.py --backends jax --policies float32
Results: benchmarks/results/accelerator_smoke_<suffix>.json with --suffix.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks import common  # noqa: E402

BACKENDS = ("tensorflow", "jax", "torch")
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
CASES = ("image_classifier", "masked_lm", "causal_lm")
TEXTS = [
    "the spatial gating unit mixes tokens",
    "a gated mlp needs no attention",
    "the gate starts as the identity",
    "tokens mix through a learned matrix",
] * 4
# The reloaded model's logits against the saved one's, by compute dtype.
RELOAD_TOLERANCE = {"float32": 1e-5, "mixed_bfloat16": 1e-2}


def device_name():
    """The device the current backend computes on, in words."""
    import keras

    backend = keras.config.backend()
    if backend == "jax":
        import jax

        device = jax.devices()[0]
        return f"{device.platform}: {device.device_kind}"
    if backend == "torch":
        import torch

        if torch.cuda.is_available():
            return f"cuda: {torch.cuda.get_device_name(0)}"
        return "cpu"
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return f"gpu: {gpus[0].name}" if gpus else "cpu"


def finite(values):
    import keras
    import numpy as np

    array = np.asarray(keras.ops.convert_to_numpy(values), dtype="float32")
    return bool(np.isfinite(array).all())


def image_classifier_case(folder):
    import keras
    import numpy as np

    import keras_gmlp

    model = keras_gmlp.GMLPImageClassifier.from_preset(
        "gmlp_micro4_32", num_classes=10
    )
    model.compile(
        optimizer="adamw",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (8, 32, 32, 3), dtype="uint8")
    labels = rng.integers(0, 10, (8,))
    history = model.fit(images, labels, batch_size=8, epochs=1, verbose=0)
    loss = history.history["loss"][-1]
    logits = model.predict(images, verbose=0)
    path = os.path.join(folder, "classifier.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    again = reloaded.predict(images, verbose=0)
    policy = keras.config.dtype_policy().name
    tolerance = RELOAD_TOLERANCE.get(policy, 1e-2)
    difference = float(np.max(np.abs(np.float32(logits) - np.float32(again))))
    ok = finite(loss) and finite(logits) and difference <= tolerance
    return ok, f"loss {loss:.3f}, reload difference {difference:.1e}"


def text_backbone(tokenizer, causal):
    import keras_gmlp

    return keras_gmlp.GMLPTextBackbone.from_preset(
        "gmlp_tiny",
        vocabulary_size=tokenizer.vocabulary_size(),
        sequence_length=16,
        num_layers=2,
        causal=causal,
    )


def masked_lm_case(folder):
    import keras_gmlp

    tokenizer = keras_gmlp.GMLPTokenizer.from_corpus(TEXTS, vocabulary_size=60)
    model = keras_gmlp.GMLPMaskedLM(
        text_backbone(tokenizer, causal=False),
        preprocessor=keras_gmlp.GMLPMaskedLMPreprocessor(
            tokenizer, sequence_length=16
        ),
    )
    history = model.fit(x=TEXTS, batch_size=len(TEXTS), epochs=1, verbose=0)
    loss = history.history["loss"][-1]
    return finite(loss), f"loss {loss:.3f}"


def causal_lm_case(folder):
    import keras_gmlp

    tokenizer = keras_gmlp.GMLPTokenizer.from_corpus(TEXTS, vocabulary_size=60)
    model = keras_gmlp.GMLPCausalLM(
        text_backbone(tokenizer, causal=True),
        preprocessor=keras_gmlp.GMLPCausalLMPreprocessor(
            tokenizer, sequence_length=16
        ),
    )
    text = model.generate("the gate", max_length=12)
    ok = isinstance(text, str) and len(text) > 0
    return ok, repr(text)


def worker(policies):
    """Runs every case under each policy in this process; prints JSON."""
    import keras

    import keras_gmlp.models  # noqa: F401

    device = device_name()
    rows = []
    for policy in policies:
        for case in CASES:
            keras.config.set_dtype_policy(policy)
            keras.utils.set_random_seed(0)
            start = time.perf_counter()
            with tempfile.TemporaryDirectory() as folder:
                try:
                    ok, detail = globals()[f"{case}_case"](folder)
                except Exception as error:  # noqa: BLE001 - reported
                    traceback.print_exc()
                    ok, detail = False, f"{type(error).__name__}: {error}"
            rows.append(
                {
                    "backend": keras.config.backend(),
                    "policy": policy,
                    "case": case,
                    "device": device,
                    "ok": ok,
                    "seconds": round(time.perf_counter() - start, 1),
                    "detail": detail.splitlines()[0][:120] if detail else "",
                }
            )
    keras.config.set_dtype_policy("float32")
    print("ROWS " + json.dumps(rows))


def run_backend(backend, policies):
    """Runs `worker` under `backend` in a fresh process; returns its rows."""
    environment = dict(os.environ, KERAS_BACKEND=backend)
    command = [sys.executable, os.path.abspath(__file__), "--worker"]
    command += ["--policies", *policies]
    result = subprocess.run(
        command, env=environment, capture_output=True, text=True, check=False
    )
    for line in result.stdout.splitlines():
        if line.startswith("ROWS "):
            return json.loads(line[len("ROWS ") :])
    sys.stderr.write(result.stderr[-4000:])
    return [
        {
            "backend": backend,
            "policy": policy,
            "case": case,
            "device": "-",
            "ok": False,
            "seconds": None,
            "detail": f"the worker exited {result.returncode}",
        }
        for policy in policies
        for case in CASES
    ]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS))
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument(
        "--suffix",
        help="Write results/accelerator_smoke_<suffix>.json (not written "
        "without it).",
    )
    parser.add_argument("--worker", action="store_true", help="Internal.")
    args = parser.parse_args()
    if args.worker:
        worker(args.policies)
        return 0
    rows = []
    for backend in args.backends:
        rows += run_backend(backend, args.policies)
    columns = ["backend", "policy", "case", "device", "ok", "seconds"]
    common.print_table(rows, columns + ["detail"])
    failed = [row for row in rows if not row["ok"]]
    print(f"{len(rows) - len(failed)} passed, {len(failed)} failed")
    if args.suffix:
        report = {**common.header(with_backend=False), "rows": rows}
        path = common.write_results(f"accelerator_smoke_{args.suffix}", report)
        print(f"wrote {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
