"""A Gradescope-sized envelope around a command: half a CPU and 768 MiB, as Gradescope's default
container has, with the envelope's own count of the peak memory.

Where the machine allows one (root, a cgroup file system with the cpu and memory controllers), the
command runs in a cgroup of its own: version 2 (`cpu.max`, `memory.max`, `memory.peak`) or version 1
(`cpu.cfs_quota_us`, `memory.limit_in_bytes`, `memory.max_usage_in_bytes`). Elsewhere it runs pinned
to one core with `taskset` (a whole CPU, not half), with no memory limit, and its peak is the
largest sum of its processes' resident memory sampled every 50 ms; `Envelope.how` says which.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

try:
    import resource
except ImportError:  # Windows: no CPU figure (`last_cpu` stays 0)
    resource = None

CGROUP = Path("/sys/fs/cgroup")


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


class Envelope:
    """Runs commands within `cpus` CPUs and `memory` bytes; `how` names the mechanism."""

    def __init__(self, cpus: float = 0.5, memory: int = 768 << 20):
        self.cpus, self.memory = cpus, memory
        self.name = f"torchgrade-bench-{uuid.uuid4().hex[:8]}"
        self.folders: list[Path] = []
        self.last_cpu = 0.0
        self.how = self._make()

    def _make(self) -> str:
        period = 100_000
        quota = int(self.cpus * period)
        if os.geteuid() == 0 and {"cpu", "memory"} <= set((CGROUP / "cgroup.controllers").read_text().split()
                                                           if (CGROUP / "cgroup.controllers").is_file() else ()):
            try:
                (CGROUP / "cgroup.subtree_control").write_text("+cpu +memory")
                folder = CGROUP / self.name
                folder.mkdir()
                self.folders = [folder]
                (folder / "cpu.max").write_text(f"{quota} {period}")
                (folder / "memory.max").write_text(str(self.memory))
                (folder / "memory.swap.max").write_text("0")
                return f"a cgroup (v2) of {self.cpus:g} CPU and {self.memory >> 20} MiB"
            except OSError:
                self.close()
        if os.geteuid() == 0 and _writable(CGROUP / "cpu") and _writable(CGROUP / "memory"):
            try:
                cpu, memory = CGROUP / "cpu" / self.name, CGROUP / "memory" / self.name
                cpu.mkdir()
                self.folders.append(cpu)
                memory.mkdir()
                self.folders.append(memory)
                (cpu / "cpu.cfs_period_us").write_text(str(period))
                (cpu / "cpu.cfs_quota_us").write_text(str(quota))
                (memory / "memory.limit_in_bytes").write_text(str(self.memory))
                if not (cpu / "cpuacct.usage").is_file() and _writable(CGROUP / "cpuacct"):
                    with contextlib.suppress(OSError):  # (where cpuacct is a hierarchy of its own): the CPU count
                        (CGROUP / "cpuacct" / self.name).mkdir()
                        self.folders.append(CGROUP / "cpuacct" / self.name)
                return f"a cgroup (v1) of {self.cpus:g} CPU and {self.memory >> 20} MiB"
            except OSError:
                self.close()
        if shutil.which("taskset"):
            return "taskset -c 0 (a whole CPU; no memory limit: the peak is sampled resident memory)"
        return "no envelope (no cgroup, no taskset): the whole machine; the peak is sampled resident memory"

    def _reset_peak(self) -> None:
        for folder in self.folders:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                if (folder / name).is_file():
                    try:
                        (folder / name).write_text("0")
                    except OSError:  # memory.peak is reset only on newer kernels
                        pass

    def _peak(self) -> int | None:
        for folder in self.folders:
            for name in ("memory.peak", "memory.max_usage_in_bytes"):
                if (folder / name).is_file():
                    return int((folder / name).read_text().split()[0])
        return None

    def _cpu(self) -> float | None:
        """CPU seconds the cgroup's processes used so far (cpu.stat in version 2, cpuacct.usage in 1)."""
        for folder in self.folders:
            with contextlib.suppress(OSError, ValueError):
                if (folder / "cpuacct.usage").is_file():
                    return int((folder / "cpuacct.usage").read_text()) / 1e9
                fields = dict(line.split()[:2] for line in (folder / "cpu.stat").read_text().splitlines())
                if "usage_usec" in fields:  # (version 1's cpu.stat counts throttling only)
                    return int(fields["usage_usec"]) / 1e6
        return None

    def run(self, args: list[str], **kwargs) -> tuple[float, int, int]:
        """(seconds, peak bytes, exit status) of one command run inside the envelope; `last_cpu` is then
        the CPU seconds (user and system) it used: the cgroup's own count where there is one, else those
        of the command and of the processes it waited for. A loaded machine slows them less than it
        slows the seconds on the clock."""
        if self.folders:
            self._reset_peak()
            enter = "; ".join(f'echo $$ > "{f}/cgroup.procs"' for f in self.folders)
            args = ["sh", "-c", f'{enter}; exec "$@"', "sh", *args]
        elif shutil.which("taskset"):
            args = ["taskset", "-c", "0", *args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN) if resource else None
        cpu_before = self._cpu()
        started = time.perf_counter()
        process = subprocess.Popen(args, **kwargs)
        sampled = [0]
        if not self.folders:
            threading.Thread(target=_sample, args=(process.pid, sampled, process), daemon=True).start()
        status = process.wait()
        seconds = time.perf_counter() - started
        cpu_after = self._cpu()
        if cpu_before is not None and cpu_after is not None:
            self.last_cpu = cpu_after - cpu_before
        elif before is not None:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            self.last_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        peak = self._peak() if self.folders else sampled[0]
        return seconds, peak or 0, status

    def close(self) -> None:
        """Remove the cgroup. The command's last processes (a sandbox ending with its parent) may still be
        in it when the command returns, and a cgroup with processes cannot be removed: they are killed,
        and the removal is tried for a few seconds, so that no run leaves its cgroup behind."""
        for folder in reversed(self.folders):
            deadline = time.monotonic() + 5
            while True:
                with contextlib.suppress(OSError, ValueError):
                    for pid in (folder / "cgroup.procs").read_text().split():
                        with contextlib.suppress(OSError):
                            os.kill(int(pid), signal.SIGKILL)
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        print(f"  (the cgroup {folder} could not be removed)")
                        break
                    time.sleep(0.1)
        self.folders = []


def _sample(pid: int, peak: list[int], process: subprocess.Popen) -> None:
    import psutil

    while process.poll() is None:
        try:
            root = psutil.Process(pid)
            total = sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])
            peak[0] = max(peak[0], total)
        except psutil.Error:
            pass
        time.sleep(0.05)
