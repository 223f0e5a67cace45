"""The Ray Data engine of ``scan``: the shard list as a dataset, one actor per worker.

    ray.data.from_items([shard, ...])
      .map_batches(ShardScanner, compute=ActorPoolStrategy(size=workers))   tokenizer built once per actor
      -> one JSON profile per shard -> merged by the caller, in shard order

Ray is an optional extra (``requirements-ray.txt``); this module imports it only when
a scan asks for ``engine="ray"``. To join a running cluster pass ``ray_address``
("auto", or "HOST:PORT"); every node needs the same packages and can read the paths.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os

import numpy as np

import packing_core.data.sources as sources
from packing_core._validate import InputError
from packing_core.data.profile import LengthProfile

INSTALL_RAY = "pip install -r requirements-ray.txt"


class ShardScanner:
    """A Ray Data actor: holds one tokenizer, turns a batch of shard rows into their profiles."""

    def __init__(self, load_tokenizer, scan_shard, kind: str, columns: list[str], cap: int | None, budget):
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        self.tokenizer, self.error = None, ""
        try:   # a tokenizer that cannot load is one line for the driver, not a dead actor's traceback
            self.tokenizer = load_tokenizer()
        except Exception as e:  # noqa: BLE001
            first = (str(e).strip().splitlines() or [""])[0][:300]
            self.error = first if isinstance(e, InputError) else f"could not load the tokenizer ({type(e).__name__}: {first})"
        self.scan_shard = scan_shard    # data.scan.scan_shard, passed in: the engines share it
        self.kind, self.columns, self.cap, self.budget = kind, list(columns), cap, budget

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        profiles, errors = [], []
        for path, fmt, name, first, stop, lines in zip(batch["path"], batch["fmt"], batch["name"], batch["first"],
                                                       batch["stop"], batch["lines"]):
            try:
                if self.error:
                    raise InputError(self.error)
                # opened again here, on the worker: the regular-file check holds on every node
                shard = dataclasses.replace(sources.open_source(str(path), str(fmt), name=str(name)),
                                            row_groups=None if first < 0 else (int(first), int(stop)),
                                            lines=None if lines[0] < 0 else (int(lines[0]), int(lines[1]), int(lines[2])),
                                            _handles=[])
                profile = self.scan_shard(shard, self.kind, self.columns, self.tokenizer, self.cap, self.budget)
                profiles.append(json.dumps(profile.to_dict()))
                errors.append("")
            except Exception as e:  # noqa: BLE001  handed back as data: the driver raises it with the shard's name
                profiles.append("")
                errors.append(str(e) if isinstance(e, InputError) else
                              f"{name} failed ({type(e).__name__}: {str(e)[:300]})")
        return {"index": batch["index"], "path": batch["path"], "profile": np.array(profiles, dtype=object),
                "error": np.array(errors, dtype=object)}


def scan_ray(shards: list[sources.Source], kind: str, columns: list[str], load_tokenizer, scan_shard, cap,
             workers: int, address: str | None, finished, budget) -> None:
    """Scan ``shards`` on Ray; call ``finished(index, profile)`` as each shard's counts arrive."""
    try:
        import ray
        import ray.data
    except ImportError:
        raise InputError(f"--engine ray needs Ray: {INSTALL_RAY} (or use --engine local)") from None
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(address=address, num_cpus=workers if address is None else None, include_dashboard=False,
                     log_to_driver=False, logging_level=logging.WARNING)
        except (ConnectionError, RuntimeError, ValueError) as e:
            raise InputError(f"could not reach a Ray cluster at {address!r} ({e}); start one with "
                             "`ray start --head` or pass --ray-address HOST:PORT") from None
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False   # the caller shows progress
        logging.getLogger("ray.data").setLevel(logging.WARNING)
        if any(s.path is None for s in shards):
            raise InputError("--engine ray reads files by their paths; an upload in memory is scanned with "
                             "--engine local")
        ds = ray.data.from_items([{"index": i, "path": str(s.path), "fmt": s.fmt, "name": s.name,
                                   "first": (s.row_groups or (-1, -1))[0], "stop": (s.row_groups or (-1, -1))[1],
                                   "lines": list(s.lines or (-1, -1, -1))}
                                  for i, s in enumerate(shards)],
                                 override_num_blocks=len(shards))
        out = ds.map_batches(ShardScanner, fn_constructor_args=(load_tokenizer, scan_shard, kind, columns, cap, budget),
                             batch_size=1,
                             batch_format="numpy", num_cpus=1,
                             compute=ray.data.ActorPoolStrategy(size=min(workers, len(shards))))
        for row in out.iter_rows():
            if row["error"]:
                raise InputError(row["error"])
            finished(int(row["index"]), LengthProfile.from_dict(json.loads(row["profile"]), str(row["path"])))
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001  (a dead actor, a lost node: one line, not Ray's traceback)
        raise InputError(f"the Ray scan failed ({type(e).__name__}: {str(e)[:500]}); see the Ray logs") from None
    finally:
        if started:
            ray.shutdown()
