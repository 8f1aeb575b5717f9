"""What every benchmark records and how it times, shared by the scripts.

`header()` describes the run: the backend, the library versions, the
machine (CPU model, family and model number, cores, the flags that decide
matmul speed: FMA, AVX2, AVX-512, AVX512-BF16, AMX; memory), the variables
that set threads, the load average (these machines are shared), the
commit, the time and the command line. `write_results()` writes it, with
the figures, to `benchmarks/results/<name>.json`; `print_table()` prints
the rows. `alternate()` times several variants in interleaved rounds, so
that drift in the machine's load hits all of them alike: report medians
of ratios measured in the same run, never absolute figures alone.
`timed()` gives wall and CPU seconds, `steady_step_peak()` a training
step's peak memory with compilation over.

The image benchmarks (`vision.py`, `memory.py`) share their flags
(`image_benchmark_parser`), their workers' environment (`worker_env`),
the timm worker's command line (`timm_worker_command`), the JSON-lines
worker protocol (`Worker` and its other side, `serve`), the models' FLOPs
(`forward_flops`) and, inside a Keras worker, the thread set-up
(`configure_threads`), the compiled classifier (`build_image_classifier`)
and the random batch (`random_image_batch`).

Imports only the standard library at module level: Keras, numpy and the
backends are imported by the functions that need them, so that a driver
process stays free of any backend and a worker of another virtualenv (the
timm one, `timm_worker.py`, which has no Keras) can import this module.
"""

import argparse
import datetime
import importlib.metadata
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
    "fma",
    "avx2",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)
# Modules whose versions a result records, where installed.
VERSIONED = (
    "keras",
    "keras_hub",
    "numpy",
    "jax",
    "jaxlib",
    "tensorflow",
    "torch",
)
# Variables that change glibc malloc's behaviour, and so RSS.
MALLOC_VARIABLES = (
    "GLIBC_TUNABLES",
    "MALLOC_ARENA_MAX",
    "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
    "LD_PRELOAD",
)
# Variables that pick the backend, its threads, its compiler and malloc's
# behaviour.
ENVIRONMENT = (
    "KERAS_BACKEND",
    "OMP_NUM_THREADS",
    "OMP_WAIT_POLICY",
    "XLA_FLAGS",
    "TF_XLA_FLAGS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    *MALLOC_VARIABLES,
)
IMAGE_MODELS = {
    # name: (hidden_dim, ffn_dim, num_layers), patch 16, 30 blocks.
    "gmlp_ti16_224": (128, 768, 30),
    "gmlp_s16_224": (256, 1536, 30),
    "gmlp_b16_224": (512, 3072, 30),
}


# ------------------------------------------------------ what a run records


def cpu_info(cpuinfo_path="/proc/cpuinfo"):
    """Model, cores and the matmul-relevant flags of this CPU, read from
    `cpuinfo_path`.

    `family` and `model_number` are /proc/cpuinfo's `cpu family` and
    `model` (`None` where it has none): machines named alike differ (two
    2-core "AMD EPYC" with the same flags, of families 25 and 26, differ
    about 2x in matmul speed).
    `logical_cpus` counts the machine's, `usable_cpus` those this process
    may run on (its affinity); `flags` lists the `CPU_FLAGS` present;
    `native_bfloat16` says whether bfloat16 matmuls have hardware
    (AVX512-BF16 or AMX).
    """
    model, flags = platform.processor() or platform.machine(), set()
    family = model_number = None
    try:
        text = pathlib.Path(cpuinfo_path).read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name":
            model = value.strip()
        elif key == "cpu family" and value.strip().isdigit():
            family = int(value)
        elif key == "model" and value.strip().isdigit():
            model_number = int(value)
        elif key == "flags":
            flags = set(value.split())
            break
    usable = None
    if hasattr(os, "sched_getaffinity"):
        usable = len(os.sched_getaffinity(0))
    return {
        "model": model,
        "family": family,
        "model_number": model_number,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable,
        "flags": [flag for flag in CPU_FLAGS if flag in flags],
        "native_bfloat16": bool({"avx512_bf16", "amx_bf16"} & flags),
    }


def cpu_name(machine):
    """`machine`'s (`cpu_info()`'s) model, with its family and model
    number where /proc/cpuinfo has them: "AMD EPYC (family 26, model 2)"."""
    if machine.get("family") is None:
        return machine["model"]
    return (
        f"{machine['model']} (family {machine['family']}, model "
        f"{machine['model_number']})"
    )


def memory_gib():
    """Total memory in GiB, from /proc/meminfo (None elsewhere)."""
    try:
        for line in pathlib.Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def versions(modules=VERSIONED):
    """Python's version and that of each installed module of `modules`.

    A module already imported gives its `__version__`; any other its
    distribution's, read without importing it (a driver process stays
    free of the backends).
    """
    found = {"python": platform.python_version()}
    for name in modules:
        module = sys.modules.get(name)
        if hasattr(module, "__version__"):
            found[name] = module.__version__
            continue
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return found


def environment(backend=None):
    """The `ENVIRONMENT` variables set, and torch's intra-op thread count
    when `backend` is torch.

    On a machine shared with other jobs, torch's OpenMP threads can wait
    on each other for long: record them with every figure.
    """
    found = {
        name: os.environ[name] for name in ENVIRONMENT if name in os.environ
    }
    if backend == "torch":
        import torch

        found["torch_intra_op_threads"] = torch.get_num_threads()
    return found


def commit():
    """The repository's commit, with `+dirty` when tracked files differ
    from it (None outside a git checkout)."""

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=REPOSITORY, capture_output=True, text=True
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        if not head:
            return None
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except OSError:
        return None
    return head + ("+dirty" if dirty else "")


def load_average():
    """The 1, 5 and 15-minute load averages (None where the OS has none)."""
    try:
        return [round(load, 2) for load in os.getloadavg()]
    except OSError:
        return None


def header(with_backend=True):
    """A dictionary that describes this run, for the results file.

    Args:
        with_backend: bool. Whether this process runs Keras: records its
            backend (`keras.config.backend()`, importing Keras) and, on
            torch, its thread count. False in a driver that only starts
            worker processes: `backend` is then None, and the workers'
            backends are the driver's to record.
    """
    backend = None
    if with_backend:
        import keras

        backend = keras.config.backend()
    return {
        "backend": backend,
        "versions": versions(),
        "machine": {
            **cpu_info(),
            "memory_gib": memory_gib(),
            "system": f"{platform.system()} {platform.machine()}",
        },
        "environment": environment(backend),
        "load_average_start": load_average(),
        "commit": commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"
        ),
        "command": " ".join([os.path.basename(sys.executable), *sys.argv]),
    }


def describe(run):
    """One line for the top of the printed table, from `header()`'s."""
    machine = run["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in run["versions"].items())
    return (
        f"{run['backend']} ({versions}) on {cpu_name(machine)}, "
        f"{machine['usable_cpus']} of {machine['logical_cpus']} cpus, "
        f"flags: {' '.join(machine['flags']) or 'none found'}; environment "
        f"{run['environment']}; load {run['load_average_start']}; commit "
        f"{run['commit']}"
    )


def checkout_folder(path):
    """`path` made absolute, for a folder holding a `keras_gmlp` package.

    A missing folder on `PYTHONPATH` is skipped, so a worker given one
    would import this checkout's `keras_gmlp` and compare it with itself:
    anything else is a `SystemExit` naming the path.
    """
    path = os.path.abspath(path)
    if not os.path.isfile(os.path.join(path, "keras_gmlp", "__init__.py")):
        raise SystemExit(
            f"Received --baseline {path}; expected a checkout folder holding "
            f"keras_gmlp/ (git worktree add {path} <commit>)."
        )
    return path


def write_results(name, report):
    """Writes `report`, plus the load average at its end, to
    `benchmarks/results/<name>.json`; returns the path.

    Scripts that run one backend per process put it in `name`
    (`f"{name}_{report['backend']}"`), so the backends' files sit side by
    side.
    """
    RESULTS.mkdir(parents=True, exist_ok=True)
    report = dict(report, load_average_end=load_average())
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    return path


def median(values):
    """The median of `values`, Nones left out (None if nothing is left)."""
    values = [value for value in values if value is not None]
    return statistics.median(values) if values else None


def print_table(rows, columns):
    """Prints `rows` (dicts) as a Markdown table of `columns`."""

    def cell(value):
        if value is None:
            return "-"
        if isinstance(value, float):
            return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"
        return str(value)

    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(cell(row.get(c)) for c in columns) + " |")


# ------------------------------------------------------------------ timing


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


def timed(function, steps):
    """Runs `function()` `steps` times: wall seconds and CPU seconds.

    CPU seconds are the process's user + system time over all its threads,
    so `cpu / wall` is the number of cores the work kept busy.
    """
    start_cpu = sum(os.times()[:2])
    start = time.perf_counter()
    for _ in range(steps):
        function()
    wall = time.perf_counter() - start
    return wall, sum(os.times()[:2]) - start_cpu


# ------------------------------------------------------------------ memory


def proc_status_kib(field):
    """A `VmRSS`/`VmHWM` line of /proc/self/status in KiB (None if absent)."""
    try:
        with open("/proc/self/status") as file:
            for line in file:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def release_free_memory():
    """Returns the C heap's free pages to the OS (glibc `malloc_trim`), so
    that RSS counts live memory only; a no-op elsewhere."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def steady_step_peak(step, steps):
    """Peak RSS growth of `steps` more calls of `step`, compilation over.

    `ru_maxrss` keeps the process's peak for good, so a first step that
    compiles (XLA, tf.function) hides the steady step's peak under the
    compiler's. Linux resets the peak (VmHWM) to the current RSS on
    writing 5 to /proc/self/clear_refs; the steady peak is VmHWM after the
    steps minus the RSS before them: activations kept for the backward
    pass, gradients and the optimizer's temporaries. The free memory the
    allocator keeps from earlier steps is handed back first
    (`release_free_memory`): resident, it would absorb the steps' peak.

    Returns:
        `{"steady_rss_kib", "steady_hwm_kib"}`, or `{}` where the reset is
        not available.
    """
    release_free_memory()
    try:
        with open("/proc/self/clear_refs", "w") as file:
            file.write("5")
    except OSError:
        return {}
    rss = proc_status_kib("VmRSS")
    for _ in range(steps):
        step()
    hwm = proc_status_kib("VmHWM")
    if rss is None or hwm is None:
        return {}
    return {"steady_rss_kib": rss, "steady_hwm_kib": hwm}


def saved_tensor_storages(function):
    """`(function(), {storage pointer: bytes})`: the output of `function`
    and the storages of the tensors torch's autograd saves while it runs,
    each storage once."""
    import torch

    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = function()
    return output, storages


# ----------------------------------------------------------------- workers


def serve(handlers):
    """A worker's loop: JSON commands on stdin, JSON answers on stdout.

    Each command is `{"op": name, ...}`; the answer is what
    `handlers[name](**rest)` returns, or `{"error": ...}`. Anything the
    libraries print goes to stderr, so stdout carries answers only.
    """
    import traceback

    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        command = json.loads(line)
        op = command.pop("op")
        if op == "quit":
            break
        try:
            answer = handlers[op](**command)
        except Exception as error:  # reported to the driver, which goes on
            traceback.print_exc()
            answer = {"error": f"{type(error).__name__}: {error}"[:500]}
        answers.write(json.dumps(answer) + "\n")


class Worker:
    """A worker process spoken to by JSON lines (its side: `serve`).

    `command` is its command line, `env` its environment, `log` where its
    stderr goes (None: this process's). `ask` answers `{"error": ...}`
    when the worker did not start or died."""

    def __init__(self, command, env, log):
        self.process = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=REPOSITORY,
        )
        self.ready = None

    def wait_ready(self):
        if self.ready is None:
            line = self.process.stdout.readline()
            self.ready = bool(line) and json.loads(line).get("ready", False)
        return self.ready

    def ask(self, op, **arguments):
        if not self.wait_ready():
            return {"error": "worker failed to start (see the log)"}
        self.process.stdin.write(json.dumps({"op": op, **arguments}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            return {"error": "worker died (see the log)"}
        return json.loads(line)

    def close(self):
        if self.process.poll() is None:
            try:
                self.process.stdin.write('{"op": "quit"}\n')
                self.process.stdin.flush()
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()


def add_reuse_freed_memory_argument(parser):
    """Adds `--reuse-freed-memory` to a driver's (and its workers') flags."""
    parser.add_argument(
        "--reuse-freed-memory",
        action="store_true",
        help="the Keras workers call keras_gmlp.kernels.reuse_freed_memory() "
        "first, as the keras-gmlp command does (JAX only)",
    )


def reuse_freed_memory_flags(enabled):
    """The part of a worker's command line that passes it on."""
    return ["--reuse-freed-memory"] if enabled else []


def start_reusing_freed_memory(enabled):
    """A worker's first step: `keras_gmlp.kernels.reuse_freed_memory()`
    when `enabled`, before the backend computes anything."""
    if enabled:
        from keras_gmlp.kernels import reuse_freed_memory

        reuse_freed_memory()


def image_benchmark_parser(doc):
    """The flags `vision.py` and `memory.py` share; the script adds its own.

    `--models`, `--backends`, `--batch-size`, `--image-size`, `--threads`,
    `--timm-python`, `--suffix` and, for the worker processes,
    `--worker-model`.

    Args:
        doc: str. The script's docstring: its first line describes it, the
            rest is the help's epilog.
    """
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
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timm-python", default=TIMM_PYTHON)
    parser.add_argument("--suffix", default="", help="of the results file")
    # A worker's one model. Not `--model`: argparse takes that, a prefix,
    # for `--models`, as a user typing it means.
    parser.add_argument(
        "--worker-model",
        dest="model",
        default="gmlp_ti16_224",
        help=argparse.SUPPRESS,
    )
    return parser


def run_json(command, env):
    """Runs `command` (a worker process) from the repository root with
    `env`; returns the last JSON object it printed, or `{"error": the end
    of its stderr}` if it printed none."""
    result = subprocess.run(
        command, env=env, capture_output=True, text=True, cwd=REPOSITORY
    )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": result.stderr[-2000:]}


def worker_env(backend, threads, timm=False):
    """The environment of a worker process: this repository importable,
    TensorFlow's logs quiet, `backend` (if any).

    Each side runs as its users run it. A keras_gmlp worker gets the
    variables of `keras_gmlp.set_backend_environment()`
    (`OMP_WAIT_POLICY=PASSIVE`, `TF_ENABLE_ONEDNN_OPTS=1`), set here so
    that they hold before its backend loads, whatever it imports first;
    the timm worker (`timm=True`) gets torch's default wait policy
    (threads spin a while, then sleep). A value the environment sets holds
    for both. `PASSIVE` makes timm's training step markedly slower: giving
    it to the timm worker would favour keras_gmlp in every `x timm`
    figure.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPOSITORY)] + env.get("PYTHONPATH", "").split(os.pathsep)
    ).rstrip(os.pathsep)
    if not timm:
        from keras_gmlp.environment import BACKEND_ENVIRONMENT

        for name, (_, value) in BACKEND_ENVIRONMENT.items():
            env.setdefault(name, value)
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


def configure_threads(threads, share_cores=False):
    """Pins the backend's thread pools to `threads` (before any op).

    With `share_cores`, TensorFlow's ops get their chain's share of them
    instead (`keras_gmlp.kernels.share_cores_between_chains`, as the
    image jobs run). Returns whether they do."""
    backend = os.environ["KERAS_BACKEND"]
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
    elif backend == "tensorflow":
        import tensorflow as tf

        from keras_gmlp.kernels import share_cores_between_chains

        shared = share_cores and share_cores_between_chains(threads)
        if not shared:
            tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        return bool(shared)
    return False


def build_image_classifier(model_name, image_size, jit_compile, precision):
    """`keras_gmlp.models.image_classifier(model_name)`, compiled with the
    package's AdamW, `FusedAdamW` (learning rate 1e-3), as the tasks'
    `compile()` and the training jobs use it, and sparse cross-entropy
    from logits."""
    import keras

    from keras_gmlp import models
    from keras_gmlp.kernels import FusedAdamW

    model = models.image_classifier(
        model_name, image_size=image_size, dtype=precision
    )
    model.compile(
        optimizer=FusedAdamW(learning_rate=1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit_compile,
    )
    return model


def random_image_batch(batch_size, image_size, seed=0):
    """`(images, labels)`: uniform float32 RGB images, ImageNet labels.

    The arrays start on 64 bytes, as the batches a gMLP task's JAX step
    takes under `reuse_freed_memory` do
    (`keras_gmlp.kernels.allocator.with_ready_inputs`): JAX uses them in
    place. `train_on_batch` does not align them itself; JAX would copy an
    unaligned batch on one of its threads, and where glibc puts that copy
    decides whether the next step reuses the freed step buffer.
    """
    import numpy as np

    from keras_gmlp.kernels.allocator import aligned

    rng = np.random.default_rng(seed)
    images = rng.uniform(size=(batch_size, image_size, image_size, 3))
    labels = rng.integers(0, 1000, (batch_size,))
    return aligned(images.astype("float32")), aligned(labels)


# ------------------------------------------------------------------- FLOPs


def image_model_flops(
    image_size, patch_size, channels, hidden_dim, ffn_dim, num_layers, classes
):
    """Forward multiply-adds of one image through a gMLP image classifier.

    With n = (image_size / patch_size)^2 tokens, d = hidden_dim,
    f = ffn_dim:
        stem     n * (patch_size^2 * channels) * d
        block    n * d * f          (channel projection in)
               + n * n * f / 2      (spatial gating unit, W @ v)
               + n * f / 2 * d      (channel projection out)
        head     d * classes
    LayerNorm, GELU, the gating product and the mean pooling add O(n * f)
    per block (under 1 % here) and are not counted. FLOPs = 2 x multiply-
    adds; a training step costs 3 x the forward (forward, and the two
    products of the backward pass).
    """
    n = (image_size // patch_size) ** 2
    stem = n * patch_size * patch_size * channels * hidden_dim
    block = n * hidden_dim * ffn_dim + n * n * ffn_dim // 2
    block += n * ffn_dim // 2 * hidden_dim
    return stem + num_layers * block + hidden_dim * classes


def forward_flops(model, image_size, classes=1000):
    """Forward FLOPs (2 x multiply-adds) of one image of `model`."""
    hidden_dim, ffn_dim, num_layers = IMAGE_MODELS[model]
    return 2 * image_model_flops(
        image_size, 16, 3, hidden_dim, ffn_dim, num_layers, classes
    )
