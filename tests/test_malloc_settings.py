"""`benchmarks/malloc_settings.py`: its workers' environments, and that
the `one_arena` settings keep a thread's freed large buffer mapped."""

import platform
import subprocess
import sys

import pytest

from benchmarks import common
from benchmarks import malloc_settings

# A thread mallocs and fills a 96 MiB buffer, frees it, and does it
# again: the second pass's minor page faults. (glibc's malloc, not
# numpy's, which asks for huge pages on large arrays.)
SECOND_PASS_FAULTS = """
import ctypes, resource, threading

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 96 << 20

def fill():
    buffer = libc.malloc(SIZE)
    ctypes.memset(buffer, 1, SIZE)
    libc.free(buffer)

def run():
    fill()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fill()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)

thread = threading.Thread(target=run)
thread.start()
thread.join()
"""


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
