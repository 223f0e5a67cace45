"""Fixtures for the checks: batches built by the real libraries' own code."""
import importlib
import importlib.util
import os
import sys
import types
from pathlib import Path

import pytest


def _torchtune_modules():
    """torchtune 0.6.1's PackedDataset and padded_collate_packed, without its package __init__.

    torchtune's __init__ requires torchao, which the lab does not install; the two modules used
    here import only torch, tqdm and torchtune.data._common / modules.attention_utils, so they
    load from the installed wheel's files directly (``scripts/install.sh --dev`` puts it, with
    --no-deps, into .vendor/ or $PACKING_LAB_VENDOR).
    """
    vendor = Path(os.environ.get("PACKING_LAB_VENDOR", Path(__file__).resolve().parents[2] / ".vendor"))
    root = vendor / "torchtune"
    if not (root / "datasets" / "_packed.py").is_file():
        spec = importlib.util.find_spec("torchtune")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(list(spec.submodule_search_locations)[0])
    saved = {k: v for k, v in sys.modules.items() if k == "torchtune" or k.startswith("torchtune.")}
    try:
        for pkg in ("torchtune", "torchtune.data", "torchtune.datasets", "torchtune.modules", "torchtune.utils"):
            m = types.ModuleType(pkg)
            m.__path__ = [str(root.joinpath(*pkg.split(".")[1:]))]
            sys.modules[pkg] = m
        packed = importlib.import_module("torchtune.datasets._packed")
        collate = importlib.import_module("torchtune.data._collate")
        return packed.PackedDataset, collate.padded_collate_packed
    except ImportError:
        return None
    finally:
        for k in [k for k in sys.modules if k == "torchtune" or k.startswith("torchtune.")]:
            del sys.modules[k]
        sys.modules.update(saved)



@pytest.fixture(scope="session")
def torchtune_packing():
    found = _torchtune_modules()
    if found is None:
        pytest.skip("torchtune 0.6.1 is not installed (scripts/install.sh --dev puts it in .vendor/)")
    return found
