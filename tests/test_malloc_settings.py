"""`benchmarks/malloc_settings.py`: its workers' environments, and that
the `one_arena` settings keep a thread's freed large buffer mapped."""

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import common
from benchmarks import malloc_settings
from tests.page_faults import SECOND_FILL_FAULTS

# A thread mallocs, fills and frees a 96 MiB buffer twice: the second
# pass's minor page faults.
SECOND_PASS_FAULTS = (
    SECOND_FILL_FAULTS
    + """
import threading

thread = threading.Thread(target=lambda: print(second_fill_faults()))
thread.start()
thread.join()
"""
)


def test_workers_start_from_glibc_defaults_not_the_callers_settings(
    monkeypatch,
):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
    monkeypatch.setenv("SOME_OTHER_SETTING", "kept")

    default = malloc_settings.variant_env("jax", 2, "default")
    one_arena = malloc_settings.variant_env("torch", 2, "one_arena")

    for name in common.MALLOC_VARIABLES:
        assert name not in default
    assert default["SOME_OTHER_SETTING"] == "kept"
    assert default["KERAS_BACKEND"] == "jax"
    assert one_arena["MALLOC_ARENA_MAX"] == "1"
    assert one_arena["MALLOC_MMAP_MAX_"] == "0"
    assert int(one_arena["MALLOC_TRIM_THRESHOLD_"]) >= 1 << 30
    assert "GLIBC_TUNABLES" not in one_arena
    assert one_arena["KERAS_BACKEND"] == "torch"


def second_pass_faults(variant):
    env = malloc_settings.variant_env(None, 2, variant)
    result = subprocess.run(
        [sys.executable, "-c", SECOND_PASS_FAULTS],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return int(result.stdout.split()[-1])


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="glibc's malloc settings"
)
def test_one_arena_reuses_a_threads_freed_buffer_without_faulting():
    # glibc maps a buffer this large afresh for a thread's own arena, so
    # every pass faults its pages in again: 96 MiB is 24,576 pages.
    default = second_pass_faults("default")
    one_arena = second_pass_faults("one_arena")
    assert default > 20_000
    assert one_arena < default / 10


# The main thread's second pass, after the `main_heap` worker's settings.
MAIN_HEAP_FAULTS = (
    SECOND_FILL_FAULTS
    + """
import sys
sys.path.insert(0, sys.argv[1])
from benchmarks import malloc_settings

malloc_settings.keep_freed_memory_in_main_heap()
print(second_fill_faults())
"""
)


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="glibc's malloc settings"
)
def test_main_heap_keeps_the_main_threads_freed_buffer():
    root = str(Path(__file__).resolve().parents[1])
    env = malloc_settings.variant_env(None, 2, "main_heap")
    result = subprocess.run(
        [sys.executable, "-c", MAIN_HEAP_FAULTS, root],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    # The default (the test above) faults its 24,576 pages again.
    assert int(result.stdout.split()[-1]) < 2_000


def test_masked_lm_workers_time_training_only():
    assert malloc_settings.modes("masked_lm") == ("train",)
    assert malloc_settings.modes("image") == ("train", "infer")
