"""What every benchmark records and how it times, shared by the scripts.

`header()` describes the run: backend and library versions, the CPU (model,
cores, the flags that decide matmul speed: AVX2, AVX-512, AVX512-BF16, AMX),
memory, the load average (these machines are shared), the commit and the
time. `alternate()` times several variants in interleaved rounds, so that
drift in the machine's load hits all of them alike; report medians and
ratios measured in the same run, never absolute figures alone.
`write_results()` writes `benchmarks/results/<name>_<backend>.json`.

The image benchmarks that drive worker processes (`vision.py`,
`memory.py`) share their flags (`image_benchmark_parser`), their workers'
environment (`worker_env`), the timm worker's command line
(`timm_worker_command`), and, inside a Keras worker, the thread set-up
(`configure_threads`), the compiled classifier (`build_image_classifier`)
and the random batch (`random_image_batch`). Keras is imported only by the
functions that need it, so that a driver process stays free of any backend.
"""

import argparse
import datetime
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
REPOSITORY = pathlib.Path(__file__).resolve().parent.parent
BACKENDS = ("jax", "tensorflow", "torch")
TIMM_PYTHON = "/work/timm-venv/bin/python"
# `auto` is Keras' default: XLA on jax and tensorflow, eager on torch.
JIT_COMPILE = {"jit": True, "nojit": False, "auto": "auto"}

# Flags of /proc/cpuinfo that decide float32 and bfloat16 matmul speed.
CPU_FLAGS = (
    "avx2",
    "fma",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def cpu():
    """Model name, cores and the matmul-relevant flags of this CPU."""
    info = {"model": platform.processor() or platform.machine(), "flags": {}}
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name":
            info["model"] = value.strip()
        elif key == "flags":
            flags = set(value.split())
            info["flags"] = {flag: flag in flags for flag in CPU_FLAGS}
            break
    info["logical_cpus"] = os.cpu_count()
    if hasattr(os, "sched_getaffinity"):
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    return info


def memory_gib():
    """Total memory in GiB, from /proc/meminfo (None elsewhere)."""
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def versions():
    """Versions of Python, Keras, numpy and the backend's library."""
    import keras
    import numpy as np

    found = {
        "python": platform.python_version(),
        "keras": keras.__version__,
        "numpy": np.__version__,
    }
    backend = keras.config.backend()
    module = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch"}.get(
        backend
    )
    if module:
        found[module] = __import__(module).__version__
    if backend == "jax":
        import jaxlib

        found["jaxlib"] = jaxlib.__version__
    return found


def threads():
    """The backend's thread settings and the variables that change them.

    On a machine shared with other jobs, torch's OpenMP threads can wait
    on each other for long: record them with every figure.
    """
    import keras

    found = {
        name: os.environ[name]
        for name in ("OMP_NUM_THREADS", "XLA_FLAGS", "TF_NUM_INTRAOP_THREADS")
        if name in os.environ
    }
    if keras.config.backend() == "torch":
        import torch

        found["torch_intra_op"] = torch.get_num_threads()
    return found


def commit():
    """The repository's commit, with `-dirty` when files differ from it."""
    root = pathlib.Path(__file__).resolve().parent.parent

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True
        ).stdout.strip()

    head = git("rev-parse", "--short", "HEAD")
    if not head:
        return None
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + ("-dirty" if dirty else "")


def load_average():
    """The 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def header():
    """A dictionary that describes this run, for the results file."""
    import keras

    return {
        "backend": keras.config.backend(),
        "versions": versions(),
        "cpu": cpu(),
        "memory_gib": memory_gib(),
        "threads": threads(),
        "machine": f"{platform.system()} {platform.machine()}",
        "load_average_start": load_average(),
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "command": " ".join(sys.argv),
    }


def describe(run):
    """One line for the top of the printed table."""
    flags = [name for name, present in run["cpu"]["flags"].items() if present]
    versions = ", ".join(f"{k} {v}" for k, v in run["versions"].items())
    return (
        f"{run['backend']} ({versions}) "
        f"on {run['cpu']['model']}, {run['cpu'].get('usable_cpus')} cpus, "
        f"flags: {' '.join(flags) or 'none found'}; threads "
        f"{run['threads']}; load "
        f"{run['load_average_start']}; commit {run['commit']}"
    )


def block(result):
    """Waits for an asynchronously dispatched result (JAX), returns it."""
    if hasattr(result, "block_until_ready"):
        result.block_until_ready()
    return result


def calls_per_measure(function, target_s):
    """How many calls of `function` (already compiled) last `target_s`,
    and the seconds of the call that measured it."""
    start = time.perf_counter()
    block(function())
    elapsed = time.perf_counter() - start
    return max(1, int(target_s / max(elapsed, 1e-9))), elapsed


def alternate(functions, rounds, target_s=0.5, warm_s=1.0):
    """Seconds per call of each function, timed in interleaved rounds.

    Args:
        functions: dict name -> callable without arguments, already warm
            (compiled).
        rounds: int. Each round times every function once, in turn.
        target_s: float. Rough duration of one measurement; fast functions
            are called several times per measurement.
        warm_s: float. Functions faster than this get one untimed call
            before each measurement: right after another variant (a large
            one above all) the first call pays for cold caches and fresh
            memory pages, which a training loop repeating one step does
            not.

    Returns:
        dict name -> list of seconds per call, one per round.
    """
    repeats, warm = {}, {}
    for name, function in functions.items():
        repeats[name], elapsed = calls_per_measure(function, target_s)
        warm[name] = elapsed < warm_s
    times = {name: [] for name in functions}
    for _ in range(rounds):
        for name, function in functions.items():
            if warm[name]:
                block(function())
            start = time.perf_counter()
            for _ in range(repeats[name]):
                block(function())
            times[name].append((time.perf_counter() - start) / repeats[name])
    return times


def median(values):
    return statistics.median(values)


def write_results(name, report):
    """Writes `report` to `benchmarks/results/<name>_<backend>.json`."""
    import keras

    RESULTS.mkdir(parents=True, exist_ok=True)
    report = dict(report, load_average_end=load_average())
    path = RESULTS / f"{name}_{keras.config.backend()}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def image_benchmark_parser(doc, backends_help=None):
    """The flags `vision.py` and `memory.py` share; the script adds its own.

    `--models`, `--backends`, `--batch-size`, `--image-size`, `--threads`,
    `--timm-python`, `--suffix` and, for the worker processes, `--model`.

    Args:
        doc: str. The script's docstring: its first line describes it, the
            rest is the help's epilog.
        backends_help: str or `None`. Help of `--backends`.
    """
    from benchmarks.bench_header import IMAGE_MODELS

    parser = argparse.ArgumentParser(
        description=doc.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=doc.split("\n", 1)[1],
    )
    parser.add_argument(
        "--models",
        nargs="+",
        default=["gmlp_ti16_224"],
        choices=list(IMAGE_MODELS),
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=list(BACKENDS),
        choices=BACKENDS,
        help=backends_help,
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timm-python", default=TIMM_PYTHON)
    parser.add_argument("--suffix", default="", help="of the results file")
    parser.add_argument("--model", default="gmlp_ti16_224", help="worker")
    return parser


def worker_env(backend, threads):
    """The environment of a worker process: this repository importable,
    passive OpenMP waiting, TensorFlow's logs quiet, `backend` (if any)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY)] + env.get("PYTHONPATH", "").split(os.pathsep)
    ).rstrip(os.pathsep)
    env["OMP_WAIT_POLICY"] = env.get("OMP_WAIT_POLICY", "PASSIVE")
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if backend:
        env["KERAS_BACKEND"] = backend
    return env


def timm_drop_path_rate(model):
    """The stochastic depth rate timm's `model` gets: the keras_gmlp
    preset's of the same name (gMLP-S: 0.05; timm's default is 0), so both
    sides draw and apply a drop-path mask in training. timm applies the
    rate to every block, keras_gmlp rises to it linearly from 0 at the
    first block: the same work per block, except keras_gmlp's first, which
    skips it."""
    from keras_gmlp.models.presets import PRESETS

    return PRESETS[model]["config"].get("drop_path_rate", 0.0)


def timm_worker_command(
    timm_python, model, batch_size, image_size, threads, warmup
):
    """The command line of a `timm_worker.py` process (more flags may
    follow), timm's model with `timm_drop_path_rate(model)`."""
    return [
        timm_python,
        str(REPOSITORY / "benchmarks" / "timm_worker.py"),
        "--model",
        model,
        "--batch-size",
        str(batch_size),
        "--image-size",
        str(image_size),
        "--threads",
        str(threads),
        "--warmup",
        str(warmup),
        "--drop-path-rate",
        str(timm_drop_path_rate(model)),
    ]


def configure_threads(threads):
    """Pins the backend's thread pools to `threads` (before any op)."""
    backend = os.environ["KERAS_BACKEND"]
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)


def build_image_classifier(model_name, image_size, jit_compile, precision):
    """`keras_gmlp.models.image_classifier(model_name)`, compiled with
    AdamW and sparse cross-entropy from logits."""
    import keras

    from keras_gmlp import models

    model = models.image_classifier(
        model_name, image_size=image_size, dtype=precision
    )
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def random_image_batch(batch_size, image_size, seed=0):
    """`(images, labels)`: uniform float32 RGB images, ImageNet labels."""
    import numpy as np

    rng = np.random.default_rng(seed)
    images = rng.uniform(size=(batch_size, image_size, image_size, 3))
    labels = rng.integers(0, 1000, (batch_size,))
    return images.astype("float32"), labels
