"""Training checkpoints: everything needed to continue a run exactly.

A checkpoint is a folder ``checkpoint-<step>`` holding the model (safetensors), the optimiser,
scheduler and grad-scaler states, the RNG states of every process (torch, CUDA, numpy, python) and
``trainer_state.json`` with the step and the data position. It is assembled under a temporary
name and renamed into place, so a run killed while saving leaves the previous checkpoint intact.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_model, save_model

from dense_pt.errors import FormatError, refused_pickle
from dense_pt.fsutil import remove_tree, write_json_atomic, writing

STATE_FILE = "trainer_state.json"
_NAME = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_dir(root: Path, step: int) -> Path:
    return Path(root) / f"checkpoint-{step:08d}"


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints under ``root`` (those with a state file), oldest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        m = _NAME.match(child.name)
        if m and (child / STATE_FILE).is_file():
            found.append((int(m.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1][1] if found else None


# --- RNG states -----------------------------------------------------------------------------------


def capture_rng() -> dict[str, Any]:
    np_state = np.random.get_state(legacy=True)
    assert isinstance(np_state, tuple)  # MT19937's legacy state (numpy's global generator)
    py_state = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": [np_state[0], np_state[1].tolist(), int(np_state[2]), int(np_state[3]), float(np_state[4])],
        "python": [py_state[0], list(py_state[1]), py_state[2]],
    }


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    if state.get("cuda") and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))


def _save_rng(path: Path) -> None:
    state = capture_rng()
    torch.save({"torch": state["torch"], "cuda": state["cuda"]}, path.with_suffix(".pt"))
    with open(path.with_suffix(".json"), "w", encoding="utf-8") as f:
        json.dump({"numpy": state["numpy"], "python": state["python"]}, f)


def load_tensors(path: Path) -> Any:
    """``torch.load(path, weights_only=True)``; a pickle asking for more than tensors (a global the
    safe loader blocks) is a FormatError naming the file and the global, one line."""
    import pickle

    try:
        return torch.load(path, weights_only=True)
    except pickle.UnpicklingError as exc:
        message = refused_pickle(exc, path)
        if message is None:
            raise FormatError(f"not a readable torch file ({str(exc).splitlines()[0]})", path=path) from None
        raise FormatError(message) from None


def _load_rng(path: Path) -> dict[str, Any]:
    state = load_tensors(path.with_suffix(".pt"))
    with open(path.with_suffix(".json"), encoding="utf-8") as f:
        state.update(json.load(f))
    return state


# --- save / load ----------------------------------------------------------------------------------


def save_checkpoint(
    root: Path,
    step: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: Any,
    state: dict[str, Any],
    rank: int = 0,
    world_size: int = 1,
    barrier=lambda: None,
    keep: int = 2,
) -> Path:
    """Write ``checkpoint-<step>`` atomically. Every rank calls this (each saves its RNG state);
    rank 0 writes the shared parts and renames the folder into place."""
    final = checkpoint_dir(root, step)
    tmp = final.with_name(f".{final.name}.partial")  # the same name on every rank
    try:
        if rank == 0:
            for stale in Path(root).glob(".checkpoint-*.partial"):  # of a killed run: never complete
                remove_tree(stale)
            with writing(final, (tmp,)):
                tmp.mkdir(parents=True)
        barrier()
        # A full disk (or quota) ends in one line naming the checkpoint, not torch's traceback.
        with writing(final, (tmp,)):
            _save_rng(tmp / f"rng-rank{rank}")
            if rank == 0:
                save_model(model, str(tmp / "model.safetensors"))
                torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
                torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
                if scaler is not None:
                    torch.save(scaler.state_dict(), tmp / "scaler.pt")
        barrier()
        if rank == 0:
            write_json_atomic(tmp / STATE_FILE, {**state, "step": step, "world_size": world_size})
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
    except BaseException:
        if rank == 0:  # a failed or interrupted save leaves the previous checkpoint, nothing else
            remove_tree(tmp)
        raise
    if rank == 0:
        for _, old in list_checkpoints(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    barrier()
    return final


def load_checkpoint(
    path: Path,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer | None,
    scheduler: Any,
    scaler: Any,
    rank: int = 0,
) -> dict[str, Any]:
    """Restore a checkpoint in place and return its trainer state (step, data position ...)."""
    path = Path(path)
    state_path = path / STATE_FILE
    try:
        with open(state_path, encoding="utf-8") as f:
            state = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise FormatError(f"unreadable checkpoint state: {exc}", path=state_path) from exc
    missing, unexpected = load_model(model, str(path / "model.safetensors"), strict=False)
    if missing or unexpected:
        raise FormatError(
            f"checkpoint does not match the model (missing {missing[:5]}, unexpected {unexpected[:5]})",
            path=path / "model.safetensors",
        )
    if optimizer is not None:
        optimizer.load_state_dict(load_tensors(path / "optimizer.pt"))
    if scheduler is not None:
        scheduler.load_state_dict(load_tensors(path / "scheduler.pt"))
    if scaler is not None and (path / "scaler.pt").is_file():
        scaler.load_state_dict(load_tensors(path / "scaler.pt"))
    rng_path = path / f"rng-rank{rank}"
    state["rng_restored"] = rng_path.with_suffix(".pt").is_file()
    if state["rng_restored"]:
        restore_rng(_load_rng(rng_path))
    return state
