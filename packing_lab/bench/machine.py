"""The machine a figure was measured on, in one shape for every benchmark: its CPUs, versions and load.

A timing means little without the machine and how busy it was, so every benchmark script and
the benchmark page record a :class:`Machine`: ``machine_info()`` reads it (with the 1, 5 and
15-minute load averages) before the run, ``finished()`` adds the load after it. Importing this
module costs no torch: torch's version and threads are read only when torch is already loaded.

>>> m = Machine("x86_64", 2, "3.11.7", "2.1.0", None, None, "cpu", "x86_64", (3.5, 2.0, 1.0), (4.0, 3.0, 2.0))
>>> busy_warning(m)[:70]
'The machine was busy: load average 3.5 before the run and 4.0 after, o'
>>> m.line()
'x86_64, 2 CPUs, Python 3.11.7, numpy 2.1.0; load average 3.50 before, 4.00 after'
"""
from __future__ import annotations

import os
import platform
import sys
from dataclasses import asdict, dataclass, replace

import numpy as np

# A 1-minute load average above this share of the CPUs, before the run, means someone
# else was computing (after the run our own threads are in it too).
BUSY_LOAD_SHARE = 0.5


def load_average() -> tuple[float, float, float] | None:
    """The 1, 5 and 15-minute load averages, or None where the OS has none."""
    try:
        one, five, fifteen = (round(x, 2) for x in os.getloadavg())
    except (AttributeError, OSError):
        return None
    return one, five, fifteen


@dataclass(frozen=True)
class Machine:
    """Where and how busy: the one ``machine`` shape of every benchmark's ``--json``."""

    processor: str
    cpus: int
    python: str
    numpy: str
    torch: str | None                 # torch's version, when the benchmark loaded torch
    torch_threads: int | None
    device: str                       # "cpu", "cuda:0"
    device_name: str
    load_before: tuple[float, float, float] | None
    load_after: tuple[float, float, float] | None = None
    memory_gb: float | None = None    # physical memory, where the OS says

    def finished(self) -> Machine:
        """This machine with the load average read now, after the run."""
        return replace(self, load_after=load_average())

    def line(self) -> str:
        """One line for a benchmark's printout."""
        torch = f", torch {self.torch} ({self.torch_threads} threads)" if self.torch else ""
        device = f", {self.device} ({self.device_name})" if self.device != "cpu" else ""
        load = ""
        if self.load_before:
            load = f"; load average {self.load_before[0]:.2f} before"
            load += f", {self.load_after[0]:.2f} after" if self.load_after else ""
        memory = f" ({self.memory_gb:g} GB)" if self.memory_gb else ""
        return (f"{self.processor}, {self.cpus} CPUs{memory}, Python {self.python}, numpy {self.numpy}{torch}{device}"
                f"{load}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Machine:
        loads = {k: (tuple(d[k]) if d.get(k) else None) for k in ("load_before", "load_after")}
        return cls(**{**d, **loads})


def machine_info(device: str = "cpu") -> Machine:
    """This machine now, with the load average before a run (``finished()`` adds the one after)."""
    torch = sys.modules.get("torch")
    name = cpu = cpu_model()
    if torch is not None and str(device).startswith("cuda"):
        name = torch.cuda.get_device_name(torch.device(device))
    return Machine(processor=cpu, cpus=os.cpu_count() or 1,
                   python=platform.python_version(), numpy=np.__version__,
                   torch=None if torch is None else torch.__version__,
                   torch_threads=None if torch is None else torch.get_num_threads(),
                   device=str(device), device_name=name, load_before=load_average(), memory_gb=_memory_gb())


def cpu_model() -> str:
    """The CPU's model name ("AMD EPYC"), read from ``/proc/cpuinfo`` where there is one: Python's
    ``platform.processor()`` is empty on Linux. Else that, or the architecture ("x86_64")."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()[:120] or platform.machine()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):
        return None


def busy_warning(machine: Machine) -> str | None:
    """A sentence when the load average says the machine was shared during a run, else None.

    Our own threads raise the load during the run: only load beyond them counts afterwards.
    """
    before, after, cpus = machine.load_before, machine.load_after, machine.cpus or 1
    if not before or not after:
        return None
    own = machine.torch_threads or cpus
    if before[0] <= BUSY_LOAD_SHARE * cpus and after[0] <= own + BUSY_LOAD_SHARE * cpus:
        return None
    return (f"The machine was busy: load average {before[0]:.1f} before the run and {after[0]:.1f} "
            f"after, on {cpus} CPUs. Other work shares the cores, so the times are slower and noisier "
            "than on a quiet machine; compare the best rounds, or run again later.")
