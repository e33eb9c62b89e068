"""Docker images built with no registry: a Debian base from `debootstrap`, instance images on it.

The base image (`base_image`) is a Debian rootfs made by `debootstrap --variant=minbase` with
Python 3, pytest and git from the Debian mirror apt already uses (`apt_mirror`), trimmed (no
package cache, apt lists, docs, man pages or locales) and imported with `docker import`; a
`.pth` file puts /testbed on Python's path, as the editable install of SWE-bench's images does.
An instance image (`instance_image`) is built on it (`docker build`, no network) from a
Dockerfile and a context of files (`envs.swe.docker_fixtures` writes both).

Caching: every image carries the label `rl-bench.fixture`, a hash of what it is made from (the
recipe, the Dockerfile, the files, its base's hash); an image whose label matches is reused, so
a rerun builds nothing. Nothing here pulls: the base is imported, and `docker build` is told
not to pull (its FROM is the local base).

Needs root (debootstrap), the `debootstrap` and `tar` programs, the Docker SDK (`swe` extra)
and a daemon; `ImageBuildError` says which is missing.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURE_LABEL = "rl-bench.fixture"
"""Label holding the content hash an image was built from."""
BASE_REPOSITORY = "rl-bench/swe-fixture-base"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
BASE_RECIPE = {
    "recipe": 1,
    "suite": "bookworm",
    "variant": "minbase",
    "include": ["python3", "python3-pytest", "git"],
    "trim": [
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "usr/share/doc",
        "usr/share/man",
        "usr/share/locale",
    ],
    "pth": {"usr/local/lib/python3.11/dist-packages/testbed.pth": "/testbed\n"},
    "changes": ['CMD ["/bin/bash"]', "WORKDIR /", "ENV LANG=C.UTF-8"],
}
"""What the base image is made of; its hash names and labels the image (the mirror is not part
of it: any Debian mirror of the suite gives the same packages)."""
_DEBOOTSTRAP_TIMEOUT_S = 1800


class ImageBuildError(RuntimeError):
    """An image could not be built; the message names what is missing or what failed."""


@dataclass
class Built:
    """One image: its name, whether it was built now (False: reused from the cache), seconds."""

    name: str
    built: bool
    seconds: float


def content_hash(*parts: Any) -> str:
    """sha256 (hex, 16 characters) of the JSON of `parts`, keys sorted."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def base_image() -> str:
    """The base image's name, `rl-bench/swe-fixture-base:<hash of BASE_RECIPE>`."""
    return f"{BASE_REPOSITORY}:{content_hash(BASE_RECIPE)}"


def apt_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The first Debian mirror apt uses here (deb822 `URIs:` or a one-line `deb URL suite`),
    else `DEFAULT_MIRROR`; security mirrors are skipped (they hold no full suite)."""
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*.sources"))]
    files += sorted((sources / "sources.list.d").glob("*.list"))
    for path in files:
        try:
            text = path.read_text()
        except OSError:
            continue
        for url in re.findall(r"^(?:URIs:\s*|deb\s+(?:\[[^\]]*\]\s+)?)(\S+)", text, re.M):
            if url.startswith("http") and "security" not in url:
                return url
    return DEFAULT_MIRROR


def client() -> Any:
    """A Docker client with a long read timeout (builds); ImageBuildError without SDK or daemon."""
    try:
        import docker
    except ImportError:
        raise ImageBuildError("needs the docker package (the swe extra): scripts/install.sh swe") from None
    try:
        docker_client = docker.from_env(timeout=_DEBOOTSTRAP_TIMEOUT_S)
        docker_client.ping()
    except Exception as exc:  # DockerException: no socket, connection refused
        raise ImageBuildError(f"needs a running Docker daemon: {exc}") from None
    return docker_client


def cached(docker_client: Any, name: str, digest: str) -> bool:
    """Whether image `name` exists and was built from `digest` (its `FIXTURE_LABEL`)."""
    import docker

    try:
        image = docker_client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(FIXTURE_LABEL) == digest


def _debootstrap(rootfs: Path, mirror: str) -> None:
    """`debootstrap` of BASE_RECIPE into `rootfs` (ImageBuildError with its log's tail)."""
    if shutil.which("debootstrap") is None:
        raise ImageBuildError("needs debootstrap: apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise ImageBuildError("debootstrap needs root: run the build as root")
    recipe = BASE_RECIPE
    command = [
        "debootstrap",
        f"--variant={recipe['variant']}",
        f"--include={','.join(recipe['include'])}",
        recipe["suite"],
        str(rootfs),
        mirror,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=_DEBOOTSTRAP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ImageBuildError(f"debootstrap from {mirror} ran past {_DEBOOTSTRAP_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        raise ImageBuildError(f"debootstrap from {mirror} failed ({done.returncode}): {' / '.join(tail)}")


def _finish_rootfs(rootfs: Path) -> None:
    """Trim what no test needs and add the `.pth` files of BASE_RECIPE."""
    for rel in BASE_RECIPE["trim"]:
        target = rootfs / rel
        if target.is_dir():
            for child in target.iterdir():
                if child.is_dir() and not child.is_symlink():
                    shutil.rmtree(child)
                else:
                    child.unlink()
    for rel, text in BASE_RECIPE["pth"].items():
        (rootfs / rel).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / rel).write_text(text)


def build_base(docker_client: Any, mirror: str | None = None, work: Path | None = None) -> Built:
    """The base image (module docstring), reused when its label matches; `mirror`: default
    `apt_mirror()`; `work`: where the rootfs is made (a temporary directory by default)."""
    name, digest = base_image(), content_hash(BASE_RECIPE)
    if cached(docker_client, name, digest):
        return Built(name, False, 0.0)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rl-bench-rootfs-", dir=work) as tmp:
        rootfs, archive = Path(tmp) / "rootfs", Path(tmp) / "rootfs.tar"
        _debootstrap(rootfs, mirror or apt_mirror())
        _finish_rootfs(rootfs)
        tar = ["tar", "-C", str(rootfs), "-cf", str(archive), "."]
        packed = subprocess.run(tar, capture_output=True, text=True)
        if packed.returncode != 0:
            raise ImageBuildError(f"tar of the rootfs failed: {packed.stderr.strip()[-300:]}")
        repository, tag = name.split(":")
        changes = [*BASE_RECIPE["changes"], f"LABEL {FIXTURE_LABEL}={digest}"]
        try:
            docker_client.api.import_image_from_file(
                str(archive), repository=repository, tag=tag, changes=changes
            )
        except Exception as exc:  # docker.errors.APIError: the daemon refused the archive
            raise ImageBuildError(f"docker import of {name} failed: {exc}") from None
    if not cached(docker_client, name, digest):
        raise ImageBuildError(f"docker import did not produce {name}")
    return Built(name, True, time.monotonic() - start)


def _context(dockerfile: str, files: dict[str, str]) -> bytes:
    """A build context (tar): the Dockerfile and `files` (relative path -> text, mode 0644)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path, text in {"Dockerfile": dockerfile, **files}.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def build_image(docker_client: Any, name: str, dockerfile: str, files: dict[str, str]) -> Built:
    """Image `name` from `dockerfile` and its context `files`, with no network and no pull;
    reused when its label matches the hash of both (and of the base image's recipe)."""
    import docker

    digest = content_hash(BASE_RECIPE, dockerfile, files)
    if cached(docker_client, name, digest):
        return Built(name, False, 0.0)
    start = time.monotonic()
    try:
        docker_client.images.build(
            fileobj=io.BytesIO(_context(dockerfile, files)),
            custom_context=True,
            tag=name,
            labels={FIXTURE_LABEL: digest},
            network_mode="none",
            pull=False,
            rm=True,
            forcerm=True,
        )
    except (docker.errors.BuildError, docker.errors.APIError) as exc:
        log = "".join(str(line.get("stream", "")) for line in getattr(exc, "build_log", []) or [])
        raise ImageBuildError(f"building {name} failed: {exc} {log.strip()[-500:]}".strip()) from None
    return Built(name, True, time.monotonic() - start)


def remove_images(docker_client: Any) -> list[str]:
    """Remove every image carrying `FIXTURE_LABEL` (instance images first); their names."""
    images = docker_client.images.list(filters={"label": FIXTURE_LABEL})
    images.sort(key=lambda image: any(t.startswith(BASE_REPOSITORY) for t in image.tags))
    removed = []
    for image in images:
        docker_client.images.remove(image.id, force=True)
        removed += image.tags or [image.id]
    return removed
