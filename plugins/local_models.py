"""Local models on one or more devices, shared by the built-in plugins. Batches are length-sorted so
padding stays small; several devices each get a replica and a thread (torch releases the GIL);
fp16/bf16 apply on GPU only. torch is imported only by the functions that need it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from r2med_tasks.plugin import UserError

if TYPE_CHECKING:
    import numpy as np


def parse_devices(device: str) -> list[str]:
    """``""`` (best available), ``cpu``, ``cuda``, ``cuda:N`` or a comma list of CUDA devices. Imports
    torch only where an NVIDIA device could be, so a warm run on a CPU machine never pays for it."""
    devices = [d.strip() for d in device.split(",") if d.strip()]
    if not devices:
        return ["cuda" if cuda_available() else "cpu"]
    for d in devices:
        if d != "cpu" and not d.startswith("cuda"):
            raise UserError(f"-o device={device}: expected cpu, cuda or cuda:N (comma-separated for several GPUs)")
        if d.startswith("cuda") and not cuda_available():
            raise UserError(f"--device {device}: CUDA is not available here; use -o device=cpu")
    return devices


def cuda_available() -> bool:
    """torch's answer, asked only where an NVIDIA device could be."""
    import glob

    if os.environ.get("CUDA_VISIBLE_DEVICES", "0").strip() in ("", "-1"):
        return False
    if not (glob.glob("/dev/nvidia[0-9]*") or os.path.isdir("/proc/driver/nvidia/gpus")):
        return False
    import torch

    return torch.cuda.is_available()


def quiet_transformers() -> None:
    """No per-model 'Loading weights' bars: the run's own progress display says what happens."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def torch_dtype(name: str, device: str):
    import torch

    if not device.startswith("cuda"):
        return torch.float32
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def length_sorted_batches(items: Sequence[Any], batch_size: int, length: Callable[[Any], int] = len) -> list[list[int]]:
    order = sorted(range(len(items)), key=lambda i: -length(items[i]))
    return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


def run_batches(texts: Sequence[Any], batch_size: int, replicas: Sequence[Any],
                encode_batch: Callable[[Any, list[Any]], np.ndarray], length: Callable[[Any], int] = len) -> np.ndarray:
    """Encode ``texts`` (or other items, measured by ``length``) in length-sorted batches spread
    over ``replicas``; rows in input order."""
    import numpy as np

    batches = length_sorted_batches(texts, batch_size, length)
    if not batches:
        return np.zeros((0, 0), dtype=np.float32)

    stop = threading.Event()  # set on Ctrl-C or an error: replicas end after their current batch

    def work(slot: int) -> list[tuple[list[int], np.ndarray]]:
        done = []
        for b in batches[slot::len(replicas)]:
            if stop.is_set():
                break
            done.append((b, encode_batch(replicas[slot], [texts[i] for i in b])))
        return done

    if len(replicas) == 1:  # in this thread: a worker's own malloc arena would only add memory
        parts = work(0)
    else:
        with ThreadPoolExecutor(max_workers=len(replicas)) as pool:
            try:
                parts = [p for part in pool.map(work, range(len(replicas))) for p in part]
            except BaseException:
                stop.set()
                raise
    dim = parts[0][1].shape[1]
    out = np.empty((len(texts), dim), dtype=np.float32)
    for index, emb in parts:
        out[index] = emb
    return out


class SentenceTransformerEncoder:
    """A sentence-transformers model; instructions go in as prompts (``st``, Instructor)."""

    def __init__(self, model_path: str, *, devices: list[str], batch_size: int, dtype: str = "fp32",
                 max_length: int = 0, revision: str | None = None, exclude_prompt_from_pooling: bool = False,
                 normalize: bool = True) -> None:
        self.model_path, self.devices, self.batch_size, self.dtype = model_path, devices, batch_size, dtype
        self.max_length, self.revision, self.normalize = max_length, revision, normalize
        self.exclude_prompt = exclude_prompt_from_pooling
        self._replicas: list[Any] | None = None

    @classmethod
    def of_model(cls, model: Any, *, batch_size: int, max_length: int = 0) -> SentenceTransformerEncoder:
        """An encoder running a model object already loaded (on its own device and dtype)."""
        encoder = cls("", devices=[str(model.device)], batch_size=batch_size, max_length=max_length)
        if max_length:
            model.max_seq_length = max_length
        encoder._replicas = [model]
        return encoder

    def load(self) -> None:
        """The weights loaded on every device now (else on the first encoding)."""
        self._load()

    def _load(self) -> list[Any]:
        if self._replicas is None:
            from sentence_transformers import SentenceTransformer

            quiet_transformers()
            self._replicas = []
            for device in self.devices:
                model = SentenceTransformer(self.model_path, device=device, revision=self.revision,
                                            model_kwargs={"dtype": torch_dtype(self.dtype, device)})
                if self.max_length:
                    model.max_seq_length = self.max_length
                if self.exclude_prompt:
                    model.set_pooling_include_prompt(False)
                self._replicas.append(model)
        return self._replicas

    def encode(self, texts: list[str], prompt: str) -> np.ndarray:
        def encode_batch(model, batch: list[str]) -> np.ndarray:
            return model.encode(batch, batch_size=len(batch), prompt=prompt or None, convert_to_numpy=True,
                                normalize_embeddings=self.normalize, show_progress_bar=False)

        return run_batches(texts, self.batch_size, self._load(), encode_batch)
