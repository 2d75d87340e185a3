"""Building the default sandbox image: python3, ipykernel, pip and pytest (the project's
tests run in the container: `runfix test`), and nothing else.

Two ways, both ending in the same kind of image:

- `dockerfile`: `FROM python:3.11-slim-bookworm`, then pip installs those packages.
  Needs a registry that has the base image.
- `rootfs`: `debootstrap` a minimal Debian (python3 only), add the packages with
  this machine's pip (wheels chosen for the image's Python and
  platform), trim it, and `docker import` it. Needs root and debootstrap, and
  Debian's and PyPI's package servers — but no container registry (as on CI).

`auto` uses the Dockerfile when the base image is here or can be pulled, else
the root filesystem. The image is checked at the end: a container from it must
import ipykernel.
"""

from __future__ import annotations

import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors
from docker.utils import parse_repository_tag

from executor.configs import DEFAULT_IMAGE
from executor.docker import engine

BASE_IMAGE = "python:3.11-slim-bookworm"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("ipykernel", "pip", "pytest")
PACKAGES_LABEL = "io.runfix.sandbox.packages"
"""What the image was built with: an image without it, or with other packages, is older
than this runfix (`current`)."""
DOCKERFILE = f"""\
FROM {BASE_IMAGE}
RUN pip install --no-cache-dir {" ".join(PACKAGES)} \\
 && python -m compileall -q /usr/local/lib/python3.11/site-packages
WORKDIR /workspace
LABEL io.runfix.sandbox=1
LABEL {PACKAGES_LABEL}={",".join(PACKAGES)}
CMD ["python3"]
"""
_VERSIONS = "import ipykernel, sys; print(sys.version.split()[0], ipykernel.__version__)"
_TRIM = ("usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "var/cache/apt")


class BuildError(Exception):
    """The image could not be built; the message says why and what to do."""


Say = Callable[[str], None]


def build(
    tag: str = DEFAULT_IMAGE,
    method: str = "auto",
    *,
    mirror: str = MIRROR,
    suite: str = SUITE,
    say: Say = print,
) -> str:
    """Build the image; its id. Raises `BuildError`."""
    try:
        client = engine()
    except Exception as exc:  # ExecutorUnavailable, with the fix in its message
        raise BuildError(str(exc)) from exc
    if method == "auto":
        method = "dockerfile" if _base_available(client, say) else "rootfs"
        say(f"method: {method}")
    began = time.perf_counter()
    if method == "dockerfile":
        image_id = _from_dockerfile(client, tag, say)
    elif method == "rootfs":
        image_id = _from_rootfs(client, tag, mirror, suite, say)
    else:
        raise BuildError(f"unknown method {method!r}: auto, dockerfile or rootfs")
    check(client, tag, say)
    say(f"built {tag} ({image_id[:19]}) in {time.perf_counter() - began:.0f}s")
    return image_id


def _base_available(client: docker.DockerClient, say: Say) -> bool:
    try:
        client.images.get(BASE_IMAGE)
        return True
    except docker.errors.ImageNotFound:
        pass
    say(f"pulling {BASE_IMAGE} …")
    try:
        client.images.pull(BASE_IMAGE)
        return True
    except docker.errors.APIError as exc:
        say(f"no registry reachable ({str(exc.explanation or exc).splitlines()[0][:120]})")
        return False


def _from_dockerfile(client: docker.DockerClient, tag: str, say: Say) -> str:
    try:
        for chunk in client.api.build(
            fileobj=io.BytesIO(DOCKERFILE.encode()), tag=tag, rm=True, decode=True
        ):
            if "stream" in chunk and chunk["stream"].strip():
                say(chunk["stream"].rstrip())
            if "error" in chunk:
                raise BuildError(f"the Dockerfile build failed: {chunk['error']}")
    except docker.errors.APIError as exc:
        raise BuildError(f"the Dockerfile build failed: {exc.explanation or exc}") from exc
    return str(client.images.get(tag).id)


def _from_rootfs(client: docker.DockerClient, tag: str, mirror: str, suite: str, say: Say) -> str:
    if os.geteuid() != 0:
        raise BuildError(
            "building the root filesystem needs root (debootstrap, chroot): "
            "sudo runfix sandbox build --method rootfs — or use --method dockerfile where a "
            "registry is reachable"
        )
    if shutil.which("debootstrap") is None:
        raise BuildError("debootstrap is not installed: apt-get install debootstrap")
    work = Path(tempfile.mkdtemp(prefix="runfix-rootfs-"))
    root = work / "root"
    try:
        say(f"debootstrap {suite} (minbase + python3) from {mirror} …")
        _run(
            ["debootstrap", "--variant=minbase", "--include=python3", suite, str(root), mirror],
            say,
        )
        version = python_version(root)
        say(f"adding {', '.join(PACKAGES)} for Python {version} …")
        target = root / f"usr/local/lib/python{version}/dist-packages"
        _run(pip_command(target, version, platform.machine()), say)
        inside = "/" + str(target.relative_to(root))
        _run(["chroot", str(root), "python3", "-m", "compileall", "-q", inside], say)
        for part in _TRIM:
            shutil.rmtree(root / part, ignore_errors=True)
        shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
        (root / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
        tar = work / "root.tar"
        say("docker import …")
        _run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(tar), "."], say)
        repository, name_tag = parse_repository_tag(tag)
        answer = client.api.import_image(
            src=str(tar),
            repository=repository,
            tag=name_tag or "latest",
            changes=[
                "WORKDIR /workspace",
                "ENV LANG=C.UTF-8",
                "LABEL io.runfix.sandbox=1",
                f"LABEL {PACKAGES_LABEL}={','.join(PACKAGES)}",
                'CMD ["python3"]',
            ],
        )
        if "error" in str(answer).lower():
            raise BuildError(f"docker import failed: {answer}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return str(client.images.get(tag).id)


def python_version(root: Path) -> str:
    """The root filesystem's Python (`3.11`), from where its python3 points."""
    target = os.readlink(root / "usr/bin/python3")
    match = re.fullmatch(r"python(\d+\.\d+)", Path(target).name)
    if not match:
        raise BuildError(f"cannot tell the image's Python version from {target!r}")
    return match[1]


def pip_command(target: Path, version: str, machine: str) -> list[str]:
    """This machine's pip, choosing wheels for the image's Python and glibc (Debian 12: 2.36)."""
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    nodot = version.replace(".", "")
    platforms = [f"manylinux_2_{minor}_{arch}" for minor in range(36, 16, -1)]
    platforms += [f"manylinux2014_{arch}", f"linux_{arch}"]
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target)]
    command += ["--python-version", version, "--implementation", "cp", "--abi", f"cp{nodot}"]
    for name in platforms:
        command += ["--platform", name]
    return [*command, "--only-binary=:all:", *PACKAGES]


def current(tag: str = DEFAULT_IMAGE) -> bool:
    """Whether the image here holds what this runfix builds into it (pytest came later)."""
    try:
        labels = engine().images.get(tag).labels or {}
    except Exception:  # no engine, no image
        return False
    return labels.get(PACKAGES_LABEL) == ",".join(PACKAGES)


def check(client: docker.DockerClient, tag: str, say: Say) -> None:
    """A locked-down container from the image imports ipykernel, or the build failed."""
    try:
        out = client.containers.run(
            tag,
            ["python3", "-c", _VERSIONS],
            remove=True,
            network_mode="none",
            read_only=True,
            user="65534:65534",
            cap_drop=["ALL"],
        )
    except docker.errors.DockerException as exc:
        raise BuildError(f"the image does not run ipykernel: {exc}") from exc
    python, _, ipykernel = out.decode().strip().partition(" ")
    say(f"checked: Python {python}, ipykernel {ipykernel}")


def _run(command: list[str], say: Say) -> None:
    process = subprocess.run(command, capture_output=True, text=True)
    if process.returncode != 0:
        tail = "\n".join((process.stdout + process.stderr).strip().splitlines()[-15:])
        raise BuildError(f"{command[0]} failed (exit {process.returncode}):\n{tail}")
    for line in process.stdout.strip().splitlines()[-3:]:
        say(f"  {line}")
