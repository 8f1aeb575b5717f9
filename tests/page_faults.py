"""A script's first lines that count the page faults of refilling a freed
buffer, for the tests of glibc's allocator settings."""

# Defines `second_fill_faults()`: mallocs, fills and frees a 96 MiB
# buffer twice, and returns the minor page faults of the second time.
# (glibc's malloc through ctypes, not numpy's, which asks for huge pages
# on large arrays.)
SECOND_FILL_FAULTS = """
import ctypes, resource

libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
SIZE = 96 << 20

def fill():
    buffer = libc.malloc(SIZE)
    ctypes.memset(buffer, 1, SIZE)
    libc.free(buffer)

def second_fill_faults():
    fill()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    fill()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""
