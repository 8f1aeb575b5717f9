"""Running a test's program in a fresh Python process."""

import subprocess
import sys


def last_line_of(program, env):
    """The last line `program` printed, run in a fresh Python in `env`;
    fails the test if it fails."""
    result = subprocess.run(
        [sys.executable, "-c", program],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip().splitlines()[-1]
