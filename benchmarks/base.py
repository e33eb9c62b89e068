"""Versioned evaluation sets: `BenchmarkSpec`, its data sources, and loading with provenance.

A benchmark is a frozen description of *what* is evaluated (pinned data source, prompt
template, grader, default sampling) plus a `version` that is bumped whenever the prompt, the
grader or the data change, so two eval records with the same (name, version, data_hash) are
comparable. Data comes from one of:

- a local copy (`load(data_path=...)`, the CLI's `--data`): a CSV, JSON (a list of objects),
  JSONL, parquet or arrow file, a dataset directory or a hub name (`envs.dataset_source`,
  split `test`); it always overrides the source;
- `HubSource`: `datasets.load_dataset(id, name=config, split=split, revision=...)`;
- `FileSource`: an official file at a commit-pinned URL, downloaded once into a cache;
- `BuiltinSource`: generated in-process (embedded tasks; no network).

Offline behaviour (decided here so that no caller sits in a retry loop): with
`HF_HUB_OFFLINE`/`HF_DATASETS_OFFLINE` set, a hub source is read only from the local cache
and, when that holds nothing for the dataset, `load` fails at once; otherwise the host is
probed with a short TCP connect (`PROBE_TIMEOUT_S`) before `datasets` is imported. Either
way the failure is one `BenchmarkDataError` line naming the benchmark, the source and the
`--data PATH` override with the expected columns.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import socket
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs import data_files
from envs.base import Grader, Problem, SingleTurnEnv, Task
from envs.dataset_source import DatasetSourceError, hub_cache_has, offline_reason, read_dataset
from envs.splits import Split

PROBE_TIMEOUT_S = 3.0
"""Seconds allowed for the connectivity probe before a remote source is declared unreachable."""

DOWNLOAD_TIMEOUT_S = 60.0
"""Socket timeout for downloading a `FileSource` (per read, not in total)."""

LOCAL_FORMATS = data_files.FORMATS
"""Extensions accepted for `--data PATH` and the reader used for each."""


class BenchmarkDataError(ValueError):
    """Benchmark data could not be obtained or does not match the official schema (one-line message)."""


# ----------------------------------------------------------------------------- local files


def read_rows(source: str | Path) -> list[dict[str, Any]]:
    """Rows of a `--data` source: a local file, a dataset directory or a hub name, read as the math
    task reads `task.dataset` (`envs.dataset_source.read_dataset`, split `test`, the split every
    benchmark evaluates), failing with BenchmarkDataError."""
    try:
        return read_dataset(source, split="test")
    except DatasetSourceError as exc:
        raise BenchmarkDataError(str(exc)) from None


def file_sha256(path: str | Path) -> str:
    """sha256 hex digest of a file's bytes."""
    with Path(path).open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


# ----------------------------------------------------------------------------- sources


def probe(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when a TCP connection to `url`'s host (or the HTTPS proxy) opens within `timeout`, else why not.

    A bare connect is enough to tell "no network" from "network"; it avoids the minutes of
    retries that `datasets`/`urllib` spend on an unreachable host.
    """
    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy")
    parsed = urllib.parse.urlparse(proxy if proxy else url)
    host = parsed.hostname or ""
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return None
    except OSError as exc:
        return f"{host}:{port} unreachable ({type(exc).__name__}: {exc or 'timed out'})"


class _Unavailable(Exception):
    """Internal: a source could not be reached; `BenchmarkSpec` turns it into BenchmarkDataError."""


@dataclass(frozen=True)
class HubSource:
    """A Hugging Face hub dataset pinned to `revision` (a commit sha; see each spec for exceptions)."""

    dataset_id: str
    revision: str
    split: str
    config: str | None = None
    endpoint: str = "https://huggingface.co"

    def describe(self) -> str:
        """`hub <id>@<revision> (<config>, <split>)`."""
        parts = ", ".join(x for x in (self.config, self.split) if x)
        return f"hub dataset '{self.dataset_id}'@{self.revision} ({parts})"

    def as_dict(self) -> dict[str, Any]:
        """Kind, dataset id, revision, split, config and endpoint."""
        return {"kind": "hub", **dataclasses.asdict(self)}

    def fetch(self) -> list[dict[str, Any]]:
        """Rows via `datasets.load_dataset`, after the offline/connectivity checks (module docstring)."""
        reason = offline_reason()
        if reason is not None and not hub_cache_has(self.dataset_id):
            raise _Unavailable(f"{reason} and the local cache has no copy")
        if reason is None:
            reason = probe(os.environ.get("HF_ENDPOINT", self.endpoint))
            if reason is not None:
                raise _Unavailable(reason)
        try:
            import datasets

            ds = datasets.load_dataset(
                self.dataset_id, name=self.config, split=self.split, revision=self.revision
            )
        except Exception as exc:  # network, auth, missing revision, cache miss in offline mode
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise _Unavailable(f"datasets.load_dataset failed: {type(exc).__name__}: {first}") from None
        return [dict(row) for row in ds]


def _cache_dir() -> Path:
    """Directory for downloaded `FileSource` files: `<BENCH_CACHE_DIR or user cache>/benchmarks`.

    Same root as the base checkpoints (`bench.models.cache`), without importing `bench/`.
    """
    if os.environ.get("BENCH_CACHE_DIR"):
        return Path(os.environ["BENCH_CACHE_DIR"]) / "benchmarks"
    import platformdirs

    return Path(platformdirs.user_cache_dir("rl-bench")) / "benchmarks"


@dataclass(frozen=True)
class FileSource:
    """An official data file at a commit-pinned URL (immutable, so a cached copy is reused)."""

    url: str
    pin: str
    """The commit (or tag) the URL is pinned to, repeated for provenance records."""

    def describe(self) -> str:
        """`official file <url>`."""
        return f"official file {self.url}"

    def as_dict(self) -> dict[str, Any]:
        """Kind, URL and pin."""
        return {"kind": "file", "url": self.url, "revision": self.pin}

    def local_path(self) -> Path:
        """Where the downloaded copy lives in the cache."""
        digest = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        return _cache_dir() / digest / Path(urllib.parse.urlparse(self.url).path).name

    def fetch(self) -> list[dict[str, Any]]:
        """Rows of the cached copy, downloading it first when absent (offline: fail at once)."""
        path = self.local_path()
        if not path.is_file():
            reason = offline_reason() or probe(self.url)
            if reason is not None:
                raise _Unavailable(reason)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(path.suffix + ".part")
            try:
                with urllib.request.urlopen(self.url, timeout=DOWNLOAD_TIMEOUT_S) as resp:
                    tmp.write_bytes(resp.read())
            except OSError as exc:
                raise _Unavailable(f"download failed: {type(exc).__name__}: {exc}") from None
            tmp.replace(path)  # atomic: a half-written file is never mistaken for the data
        return read_rows(path)


@dataclass(frozen=True)
class BuiltinSource:
    """Rows generated in-process by `build` (embedded benchmarks; never touches the network)."""

    recipe: str
    """How the rows are generated, e.g. `envs.arith.ArithTask().eval_problems(n=200, seed=0)`."""
    build: Callable[[], list[dict[str, Any]]] = field(compare=False, repr=False)

    def describe(self) -> str:
        """`built-in <recipe>`."""
        return f"built-in {self.recipe}"

    def as_dict(self) -> dict[str, Any]:
        """Kind and recipe."""
        return {"kind": "builtin", "recipe": self.recipe}

    def fetch(self) -> list[dict[str, Any]]:
        """The generated rows."""
        return self.build()


# ----------------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class SamplingDefaults:
    """Default generation settings of a benchmark; `k` is the number of samples per problem."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 32768
    k: int = 1

    def __post_init__(self):
        """Reject settings no engine accepts."""
        if self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_new_tokens < 1 or self.k < 1:
            raise ValueError(f"invalid sampling defaults {self}")

    def as_dict(self) -> dict[str, Any]:
        """The four settings as a dict."""
        return dataclasses.asdict(self)


def data_hash(problems: Sequence[Problem]) -> str:
    """sha256 of the canonical problem list: (key, prompt, answer, meta) sorted by key, as compact JSON.

    Sorting makes the hash independent of load order; the prompt is included, so it also
    changes with the template. Non-JSON values in `meta` are hashed through `str`.
    """
    canon = sorted(
        ({"key": p.key, "prompt": p.prompt, "answer": p.answer, "meta": p.meta} for p in problems),
        key=lambda d: d["key"],
    )
    blob = json.dumps(canon, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class BenchmarkSpec:
    """One versioned evaluation set.

    `parse_row(index, row)` turns a source row (official schema, `columns` required) into a
    Problem whose `prompt` is the raw problem text; `load` then fills `prompt_template` by
    plain substitution of `{problem}` (not `str.format`, so LaTeX braces need no escaping).
    `grader` grades single-turn completions. Multi-turn benchmarks (the agent task, SWE) have
    no grader but an `episode_task`: given the problems to evaluate, it returns the `envs` Task
    whose env plays each of them (`task.make_env(problem)`; building it checks that they can
    run here, e.g. that Docker is reachable); the episode's final reward decides correctness.
    """

    name: str
    version: int
    description: str
    source: HubSource | FileSource | BuiltinSource
    license: str
    prompt_template: str
    grader: Grader | None
    sampling: SamplingDefaults
    columns: tuple[str, ...]
    parse_row: Callable[[int, dict[str, Any]], Problem] = field(repr=False)
    episode_task: Callable[[Sequence[Problem]], Any] | None = field(default=None, repr=False)
    split: Split = Split.TEST  # or VALIDATION: tuning and checkpoint selection only, never reported
    breakdown: str | None = None
    """A `Problem.meta` key (e.g. a difficulty such as the number of operands, or a category):
    the summary then also reports avg@k per value of it (`summary["breakdown"]`)."""

    def __post_init__(self):
        """Catch spec typos at import time rather than at eval time."""
        if not isinstance(self.version, int) or self.version < 1:
            raise ValueError(f"benchmark {self.name!r}: version must be an int >= 1")
        if "{problem}" not in self.prompt_template:
            raise ValueError(f"benchmark {self.name!r}: prompt_template lacks '{{problem}}'")

    def format_prompt(self, problem_text: str) -> str:
        """The user prompt for one problem."""
        return self.prompt_template.replace("{problem}", problem_text)

    def _fail(self, what: str, reason: str) -> BenchmarkDataError:
        """The one-line error for an unreachable source, with the `--data` hint."""
        return BenchmarkDataError(
            f"benchmark '{self.name}': cannot load {what}: {reason}; pass a local copy with --data PATH "
            f"({'/'.join(sorted(set(LOCAL_FORMATS.values())))} with columns {', '.join(self.columns)})"
        )

    def load_rows(
        self, data_path: str | Path | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        """Source rows (local file when given, else the pinned source), schema-checked, first `limit`."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        if data_path is not None:
            origin, rows = str(data_path), read_rows(data_path)
        else:
            origin = self.source.describe()
            try:
                rows = self.source.fetch()
            except _Unavailable as exc:
                raise self._fail(origin, str(exc)) from None
        if not rows:
            raise BenchmarkDataError(f"benchmark '{self.name}': {origin} holds no rows")
        for i, row in enumerate(rows):
            missing = [c for c in self.columns if c not in row]
            if missing:
                raise BenchmarkDataError(
                    f"benchmark '{self.name}': {origin} row {i} lacks column(s) {', '.join(missing)}; "
                    f"expected columns: {', '.join(self.columns)}"
                )
        return rows if limit is None else rows[:limit]

    def load(self, data_path: str | Path | None = None, limit: int | None = None) -> list[Problem]:
        """The benchmark's problems, prompts filled, in source order (first `limit` when given).

        Keys must be unique, and every reference answer must be accepted by the grader
        (checked with an empty completion), so malformed data fails here, not mid-evaluation.
        """
        problems, seen = [], set()
        for i, row in enumerate(self.load_rows(data_path, limit)):
            raw = self.parse_row(i, row)
            if raw.key in seen:
                raise BenchmarkDataError(
                    f"benchmark '{self.name}': duplicate problem key {raw.key!r} (row {i})"
                )
            seen.add(raw.key)
            if self.grader is not None:
                try:
                    self.grader("", raw.answer)
                except ValueError as exc:
                    raise BenchmarkDataError(f"benchmark '{self.name}': row {i} ({raw.key}): {exc}") from None
            problems.append(dataclasses.replace(raw, prompt=self.format_prompt(raw.prompt)))
        return problems

    def data_hash(self, problems: Sequence[Problem]) -> str:
        """`data_hash(problems)` (module function), for provenance."""
        return data_hash(problems)

    def provenance(self, problems: Sequence[Problem], data_path: str | Path | None = None) -> dict[str, Any]:
        """What every eval record stores about the data: name, version, source pin, file hash, data hash."""
        return {
            "benchmark": self.name,
            "version": self.version,
            "source": self.source.as_dict(),
            "grader": getattr(self.grader, "__name__", None),
            "n_problems": len(problems),
            "data_hash": data_hash(problems),
            "data_path": _where(data_path),
            "data_file_sha256": file_sha256(data_path) if data_path and Path(data_path).is_file() else None,
        }


def _where(data_path: str | Path | None) -> str | None:
    """A `--data` source for the record: an existing path resolved, a hub name as given."""
    if data_path is None:
        return None
    return str(Path(data_path).resolve()) if Path(data_path).exists() else str(data_path)


class GradedTask(Task):
    """The episode task of a single-turn benchmark: each problem is one turn, graded by the
    benchmark's grader (`SingleTurnEnv`), so a graded benchmark is evaluated through the same
    episode code as a multi-turn one. Evaluation only: it has no training distribution."""

    max_turns = 1
    stop = ()

    def __init__(self, spec: BenchmarkSpec) -> None:
        if spec.grader is None:
            raise ValueError(f"benchmark {spec.name!r} has no grader")
        self.spec = spec
        self.name = spec.name
        self.summary = spec.description
        self.max_new_tokens = spec.sampling.max_new_tokens

    def make_env(self, problem: Problem) -> SingleTurnEnv:
        """One turn: the (already formatted) problem as a user message, graded by the benchmark."""
        return SingleTurnEnv(problem, self.spec.grader)  # type: ignore[arg-type]  # checked in __init__

    def sample_problem(self, rng):  # noqa: D102 - evaluation only
        raise NotImplementedError(f"benchmark {self.name!r} is an evaluation set, not a training task")

    def eval_problems(self, n: int, seed: int = 0):  # noqa: D102 - evaluation only
        raise NotImplementedError(f"benchmark {self.name!r}: load its problems with BenchmarkSpec.load")
