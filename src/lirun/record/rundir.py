"""RunDir: the files of one execution (design.md D1). The database holds the outcome, not this."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lirun.errors import LirunError, ValidationError
from lirun.paths import lirun_home, runs_root
from lirun.settings import RUN_ID_ENV_VARS, Settings

_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)

__all__ = [
    "RUN_ID_ENV_VARS",
    "SAFE_COMPONENT_PATTERN",
    "RunDir",
    "RunDirError",
    "allocate_run",
    "new_run_id",
    "safe_component",
    "write_atomically",
]

SAFE_COMPONENT_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
# ``artifact_root`` is the artifact_dir's old name, still written for one release (CHANGELOG.md).
_MANIFEST_IDENTITY = ("run_id", "state_root", "artifact_dir", "artifact_root")


class RunDirError(LirunError, OSError):
    """A run directory could not be created or written.

    The message names the path; make it writable or point ``LIRUN_HOME`` elsewhere.
    """


def safe_component(name: object, what: str = "name") -> str:
    """Return ``name`` if it is usable as one path component, else raise ValidationError."""
    if isinstance(name, str) and name not in (".", "..") and SAFE_COMPONENT_PATTERN.fullmatch(name):
        return name
    raise ValidationError(
        f"invalid {what} {name!r}: use 1-128 characters from A-Z a-z 0-9 . _ -, "
        "starting with a letter or digit"
    )


def new_run_id() -> str:
    """``<UTC YYYYMMDDTHHMMSS>-<6 hex>``."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{stamp}-{os.urandom(3).hex()}"


def _setup_error(action: str, path: Path, exc: OSError) -> RunDirError:
    reason = exc.strerror or str(exc)
    return RunDirError(
        f"cannot {action} {path}: {reason}; make it writable or set LIRUN_HOME "
        "to a writable directory"
    )


@dataclass(frozen=True, slots=True)
class RunDir:
    """Paths of one execution: state under ``state_root``, deliverables under ``artifact_dir``."""

    run_id: str
    state_root: Path
    artifact_dir: Path

    @property
    def manifest_path(self) -> Path:
        return self.state_root / "run.json"

    @property
    def checkpoint_path(self) -> Path:
        return self.state_root / "checkpoint.json"

    @property
    def branches_dir(self) -> Path:
        return self.state_root / "branches"

    @property
    def stream_dir(self) -> Path:
        return self.state_root / "stream"

    @property
    def synthesis_path(self) -> Path:
        return self.artifact_dir / "synthesis.md"

    @property
    def flow_log_path(self) -> Path:
        return self.artifact_dir / "flow.log"

    @property
    def dag_image_path(self) -> Path:
        return self.artifact_dir / "flow_dag.png"

    def branch_path(self, branch_id: str) -> Path:
        return self.branches_dir / f"{safe_component(branch_id, 'branch id')}.json"

    def stream_buffer_path(self, branch_id: str) -> Path:
        return self.stream_dir / f"{safe_component(branch_id, 'branch id')}.jsonl"

    def agent_artifact_dir(self, agent_id: str) -> Path:
        """``artifact_dir/<agent_id>``; ValueError if it resolves outside the artifact root."""
        path = self.artifact_dir / safe_component(agent_id, "agent id")
        # A pre-existing symlink named like the agent could point anywhere.
        if not path.resolve().is_relative_to(self.artifact_dir.resolve()):
            raise ValidationError(f"agent artifact dir {path} resolves outside {self.artifact_dir}")
        return path

    def ensure_state_dirs(self) -> None:
        # Streams and snapshots hold prompts and transcripts: private to the owner. The
        # home and runs/ are created 0700 here too, not by ``parents=True`` with the
        # umask's mode (world-writable under umask 0).
        private_dir(runs_root())
        for path in (self.state_root, self.branches_dir, self.stream_dir):
            try:
                path.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError as exc:
                raise _setup_error("create run directory", path, exc) from exc

    def ensure_artifact_dir(self) -> None:
        try:
            # Deliverables others may read, never write (under any umask).
            self.artifact_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
        except OSError as exc:
            raise _setup_error("create artifact directory", self.artifact_dir, exc) from exc

    def manifest_data(self, data: dict[str, Any] | None = None) -> dict[str, Any]:
        """What ``write_manifest`` stores: identity first, then caller fields.

        Identity fields always describe this RunDir; a caller value for them is ignored.
        """
        identity = {
            "run_id": self.run_id,
            "state_root": str(self.state_root),
            "artifact_dir": str(self.artifact_dir),
            "artifact_root": str(self.artifact_dir),
        }
        extra = {k: v for k, v in (data or {}).items() if k not in _MANIFEST_IDENTITY}
        return {**identity, **extra}

    def write_manifest(self, data: dict[str, Any]) -> None:
        """Atomically replace ``run.json``; readers see the old or the new file, never a mix."""
        payload = json.dumps(self.manifest_data(data), indent=2, sort_keys=False) + "\n"
        try:
            self.state_root.mkdir(parents=True, exist_ok=True)
            write_atomically(self.manifest_path, payload.encode("utf-8"))
        except OSError as exc:
            raise _setup_error("write manifest", self.manifest_path, exc) from exc

    def read_manifest(self) -> dict[str, Any]:
        """The manifest, or ``{}`` when there is none. Read and JSON errors propagate."""
        try:
            text = self.manifest_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValidationError(f"{self.manifest_path} does not hold a JSON object")
        return data


def private_dir(path: Path) -> None:
    """Create ``path`` (and a missing lirun home above it) with mode 0700.

    ``mkdir(mode=0o700)`` is never group- or world-writable whatever the umask (the umask
    only removes bits); parents made by ``parents=True`` would get 0777 minus the umask.
    """
    home = lirun_home()
    chain = [path]
    while chain[-1] != home and chain[-1].parent != chain[-1] and chain[-1].is_relative_to(home):
        chain.append(chain[-1].parent)
    for directory in reversed(chain):
        try:
            directory.mkdir(mode=0o700, parents=directory == home, exist_ok=True)
        except OSError as exc:
            raise _setup_error("create directory", directory, exc) from exc


def write_atomically(path: Path, payload: bytes) -> None:
    """Replace ``path`` with ``payload`` (mode 0600) so a reader sees the old file or the
    new one, never a part: a temp file beside it, fsync'd, renamed, the directory fsync'd.
    On any failure the temp file is removed and the error raised."""
    tmp_name = str(path.parent / f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    # Makes the rename durable; some filesystems refuse directory fsync, which is harmless.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def allocate_run(
    save_dir: str | os.PathLike[str] | None = None,
    run_id: str | None = None,
    settings: Settings | None = None,
) -> RunDir:
    """Pick the run id, create ``branches/`` and ``stream/``; the artifact dir is left alone.

    Id: ``run_id`` > ``settings.run_id`` (default: the environment's, ``$LIRUN_RUN_ID`` >
    ``$LIONAGI_RUN_ID``) > a new timestamped id.
    """
    if run_id is None:
        run_id = (settings or Settings.from_env()).run_id or new_run_id()
    rid = safe_component(run_id, "run id")
    state_root = runs_root() / rid
    if save_dir is not None and os.fspath(save_dir) != "":
        artifact_dir = Path(save_dir).expanduser().resolve()
    else:
        artifact_dir = state_root / "artifacts"
    run = RunDir(run_id=rid, state_root=state_root, artifact_dir=artifact_dir)
    run.ensure_state_dirs()
    return run
