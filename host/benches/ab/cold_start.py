"""Several chitin processes starting at once on a cold compile cache: an A/B driver for `chitin`
binaries on the same machine (`docs/performance.md`, "Processes starting together").

    python3 host/benches/ab/cold_start.py target/debug/chitin 4

Starts PROCESSES `chitin call echo` at the same moment on one fresh data directory (the
embedded default components, so each start loads them all into an empty cache), waits for all,
and prints the wall time until the last answered and the CPU time the processes spent together,
then how many cache entries they left. Run from the repository root after `just
build-components`; the data directory is removed at the end.
"""

import os
import subprocess
import sys
import time

from scratch_dirs import scratch_env

chitin, processes = sys.argv[1], int(sys.argv[2])
data, env = scratch_env("chitin-cold-start-")

started = time.monotonic()
children = [
    subprocess.Popen([chitin, "call", "echo", '{"message": "cold"}'], stdout=subprocess.PIPE,
                     stderr=subprocess.DEVNULL, env=env)
    for _ in range(processes)
]
cpu = 0.0
for child in children:
    _, status, usage = os.wait4(child.pid, 0)
    answer = child.stdout.read()
    assert os.waitstatus_to_exitcode(status) == 0 and b'"cold"' in answer, answer
    cpu += usage.ru_utime + usage.ru_stime
wall = time.monotonic() - started
entries = sum(name.endswith(".cwasm") for _, _, names in os.walk(os.path.join(data, "cache"))
              for name in names)
print(f"{processes} processes: {wall:.1f} s wall, {cpu:.1f} s CPU together, {entries} cache entries")
