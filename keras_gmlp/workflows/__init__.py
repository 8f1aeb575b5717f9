"""The training jobs and what uses their runs, behind `keras-gmlp`.

One module per job, each `flags -> config -> data -> model -> fit ->
outputs`: `image_classification`, `pretraining` (masked or causal language
model) and `text_classification`. Each has `add_arguments(parser)`,
`config_from_argv(argv)`, `run(config)` and `evaluate_run(run_dir)`, and
what its runs are good for (`predict_image`, `fill_in_the_blank`,
`generate_text`, `classify_text`). `training_job` holds the steps they
share (flags to config, start, compile, fit); `flags` the jobs' flags
(without a backend: the command's `--help` imports no Keras);
`inspection` describes presets, runs and model files and exports them;
`run_folder` reads a run's folder.
The command line (`keras_gmlp.cli`) and the scripts of `recipes/` are thin
entries into these modules. They import TensorFlow when they run; each
module is imported when first used.
"""

import importlib

__all__ = ["image_classification", "pretraining", "text_classification"]


def __getattr__(name):
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
