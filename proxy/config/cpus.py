"""How many CPUs this process may use: the default worker count.

``os.cpu_count()`` counts the machine's cores; a container or a ``taskset`` allows fewer. This
reads the CPU affinity mask and caps it by the cgroup CPU quota (v2 ``cpu.max``, v1
``cpu.cfs_quota_us``/``cpu.cfs_period_us``) of this process's cgroup and its ancestors.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")


@dataclass(frozen=True, slots=True)
class CpuBudget:
    """The CPUs usable, and where the number comes from (for the start-up log)."""

    affinity: int
    quota: float | None  # CPUs the cgroup quota allows; None: no quota

    @property
    def usable(self) -> int:
        if self.quota is None:
            return self.affinity
        return max(1, min(self.affinity, math.ceil(self.quota)))

    def describe(self) -> str:
        quota = "no cgroup CPU quota" if self.quota is None else f"cgroup CPU quota {self.quota:g}"
        return f"{self.usable} usable CPUs (affinity {self.affinity}, {quota})"


def cpu_budget(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> CpuBudget:
    """Affinity and cgroup quota of this process, read now."""
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        affinity = os.cpu_count() or 1
    return CpuBudget(max(affinity, 1), cgroup_quota(root, proc_cgroup))


def usable_cpus() -> int:
    return cpu_budget().usable


def cgroup_quota(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The smallest CPU quota on the way from this process's cgroup up to the root, in CPUs."""
    quotas = [q for d in _cgroup_dirs(root, proc_cgroup) if (q := _quota_in(d)) is not None]
    return min(quotas, default=None)


def _cgroup_dirs(root: Path, proc_cgroup: Path) -> list[Path]:
    """This process's cgroup folders (v2 unified, v1 ``cpu`` controller) and their parents."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    found: list[Path] = []
    for line in lines:
        _id, _sep, rest = line.partition(":")
        controllers, _sep, path = rest.partition(":")
        if controllers == "":
            base = root  # v2: "0::/path"
        elif "cpu" in controllers.split(","):
            base = next((root / n for n in ("cpu,cpuacct", "cpu", "cpuacct,cpu") if (root / n).is_dir()), root / "cpu")
        else:
            continue
        here = base / path.strip("/")
        found.extend([here, *[p for p in here.parents if p.is_relative_to(base)]])
    return found or [root]


def _quota_in(folder: Path) -> float | None:
    """The quota set in one cgroup folder, in CPUs; None when there is none (or nothing to read)."""
    try:
        quota, _sep, period = (folder / "cpu.max").read_text().strip().partition(" ")
        if quota != "max":
            return int(quota) / int(period or "100000")
        return None
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((folder / "cpu.cfs_quota_us").read_text())
        period_us = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None
