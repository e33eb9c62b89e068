"""A queue of named runs in an Optuna storage, the one record of who holds which run for both
scheduler backends (`sweeps.scheduler`): the local workers of one machine, or the driver of a
Ray cluster. Each run is done exactly once, and a dead holder's run is taken over.

Why Optuna: sweeps need a study in an Optuna storage anyway: a journal file by default
(file-locked appends), or an RDB (PostgreSQL) to keep the studies in a database. The storage
is the study's home, not a scheduler between machines: several machines are a Ray cluster's
business (`--cluster ray`).

Each run of a comparison (or trial of a sweep) is a trial whose user attribute `run` names it:

* **Claim**: a worker takes the lowest-numbered WAITING trial, a takeover (below) before any
  other, by setting it RUNNING; the storage lets exactly one worker win that transition (RDB: a
  row lock; journal: the order of the log). The winner records itself as the trial's holder
  (`worker_id`: host, boot, pid and the process's start time, so a reused pid is not mistaken
  for it).
* **Takeover**: a RUNNING trial whose holder is gone is *stale*: the next worker marks it FAIL
  ("holder gone") and enqueues a new trial for the same run, which resumes the run from its
  last checkpoint. Whether a holder is gone is asked of the backend (`RunQueue.holder_gone`):
  on this machine, whether its process still exists (`is_dead_here`; a holder of an earlier
  boot is gone); on a Ray cluster, the same question asked on the holder's node
  (`sweeps.ray_cluster.RayCluster.holder_gone`). No lease, no clock shared between machines:
  a holder is gone when its process is, at once. The local backend cannot see another
  machine's processes: a queue held there is refused (`foreign_holds`), not guessed at. A
  trial set RUNNING whose holder was never recorded (its claimer died in between) is stale
  after `UNRECORDED_HOLDER_S`.
* **Exactly once**: several workers may take over the same stale trial at once (the journal
  lets each one believe it succeeded) or enqueue the same run twice; a claimed trial whose run
  already has a lower-numbered trial RUNNING or COMPLETE is a duplicate, failed at once
  without running. A finished run is never repeated, unless asked (`redo`: its results are
  gone), and then once: the redo's trial counts only the trials after the one it replaces. The
  run directory's lock (`results.rundir.RunDir.lock`) is the last guard: two processes never
  train one run.

Only `optuna.storages` public methods are used (get_all_trials, set_trial_state_values,
set_trial_*_attr), so any Optuna storage works.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps.errors import ExperimentError

UNRECORDED_HOLDER_S = 60.0
"""How long a RUNNING trial without a recorded holder counts as just claimed (its claimer sets
the state, then writes its name: a death in between leaves no name to ask about)."""
HOLDER_GONE = "holder gone"
"""The `fail_reason` of a taken-over trial (studies written before the leases were retired say
"lease expired")."""
TAKEOVER_REASONS = (HOLDER_GONE, "lease expired")


class QueueError(ExperimentError):
    """A storage that cannot be used (one-line message)."""


def open_storage(url: str, default_journal: Path) -> Any:
    """An Optuna storage: `url` None/"" -> a journal file at `default_journal`; `journal:PATH`
    -> that journal file (`sweeps.journal`: a torn last record is repaired, a kill leaves no
    stale lock); anything else is an RDB URL (`postgresql://...`, `sqlite:///...`). A storage
    that cannot be reached is a QueueError, before any work starts."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if not url or url.startswith("journal:"):
        from sweeps.journal import RepairingJournal

        path = Path(url.partition(":")[2]) if url else default_journal
        path.parent.mkdir(parents=True, exist_ok=True)
        return optuna.storages.JournalStorage(RepairingJournal(path))
    try:
        return optuna.storages.RDBStorage(url, engine_kwargs={"pool_pre_ping": True})
    except Exception as exc:  # bad URL, server down, driver missing: say which, in one line
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "DB access module" in detail and url.startswith("postgresql"):
            detail = "the PostgreSQL driver is missing: pip install -e '.[postgres]'"
        raise QueueError(f"--storage {_redacted(url)}: cannot be used ({detail})") from None


def _redacted(url: str) -> str:
    """`postgresql://user:secret@host/db` -> `postgresql://user:***@host/db`."""
    head, at, tail = url.rpartition("@")
    if not at or "://" not in head:
        return url
    scheme, _, cred = head.partition("://")
    user = cred.partition(":")[0]
    return f"{scheme}://{user}:***@{tail}"


def worker_id() -> str:
    """This process as `host:boot:pid:start` (so a reused pid is not mistaken for us)."""
    return f"{socket.gethostname()}:{_boot_id()}:{os.getpid()}:{_start_time(os.getpid())}"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
    except OSError:
        return "?"


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return "?"


def holder_host(worker: str) -> str:
    """The host name of a `worker_id`."""
    return worker.split(":")[0]


def is_here(worker: str) -> bool:
    """Whether `worker` (a `worker_id`) was a process of this host."""
    return holder_host(worker) == socket.gethostname()


def is_dead_here(worker: str) -> bool:
    """Whether `worker`, a process of this host, no longer exists (one of an earlier boot does not;
    another host's worker: False, this host cannot tell)."""
    if not is_here(worker):
        return False
    _, boot, pid, start = (worker.split(":") + ["", "", "", ""])[:4]
    if boot != _boot_id() or not pid.isdigit():
        return True  # the machine rebooted since (or the name is not one of ours): no such process
    return _start_time(int(pid)) != start


REDO_OF = "redo_of"
"""User attribute of a trial that runs a finished run again (`RunQueue.redo`): the number of the
COMPLETE trial it replaces."""


@dataclass
class Claim:
    """A run this worker holds: its trial and name."""

    trial_id: int
    number: int
    run: str


class RunQueue:
    """The runs of one study (module docstring)."""

    def __init__(
        self,
        storage: Any,
        study_name: str,
        direction: str = "maximize",
        sampler: Any = None,
        pruner: Any = None,
    ) -> None:
        import optuna

        # the storage Optuna's own objects use (an RDB storage wrapped in its cache): a Trial built
        # on a trial this queue claimed must find it there
        self.storage = optuna.storages.get_storage(storage)
        self.study = optuna.create_study(
            storage=self.storage,
            study_name=study_name,
            load_if_exists=True,
            direction=direction,
            sampler=sampler,
            pruner=pruner,
        )
        self.worker = worker_id()
        self.holder_gone: Callable[[str], bool] = is_dead_here
        """whether a holder (a `worker_id`) is gone: this machine's check, unless the backend
        can ask further (a Ray driver asks the holder's node)"""
        self.study_id = storage.get_study_id_from_name(study_name)

    # ---- filling --------------------------------------------------------------------------
    def ensure(self, runs: list[str], retry_failed: bool = False) -> None:
        """Enqueue every run that has no trial yet (and, with `retry_failed`, every run whose
        latest trial failed for a reason other than a duplicate)."""
        latest = self.latest()
        for run in runs:
            trial = latest.get(run)
            if trial is None or (retry_failed and _failed_for_real(trial)):
                self.study.enqueue_trial({}, user_attrs={"run": run})

    def redo(self, runs: list[str], lost: Callable[[str], bool]) -> list[str]:
        """Enqueue again each of `runs` whose latest trial is COMPLETE but whose results `lost`
        says are gone (e.g. its run directory deleted): the new trial records `redo_of`, so the
        trials before it no longer make it a duplicate. Returns the runs enqueued."""
        from optuna.trial import TrialState

        latest, redone = self.latest(), []
        for run in runs:
            trial = latest.get(run)
            if trial is not None and trial.state == TrialState.COMPLETE and lost(run):
                self.study.enqueue_trial({}, user_attrs={"run": run, REDO_OF: trial.number})
                redone.append(run)
        return redone

    def latest(self) -> dict[str, Any]:
        """Run name -> its latest trial that is not a duplicate (FrozenTrial)."""
        out: dict[str, Any] = {}
        for t in self._trials():
            run = t.user_attrs.get("run")
            if run is not None and not t.user_attrs.get("duplicate"):
                out[run] = t  # trials come in number order: the last one wins
        return out

    def _trials(self, states: tuple | None = None) -> list[Any]:
        return self.storage.get_all_trials(self.study_id, deepcopy=False, states=states)

    # ---- claiming -------------------------------------------------------------------------
    def claim(self) -> Claim | None:
        """The next run for this worker, or None when nothing is waiting (some runs may still
        be held by live workers: see `pending`)."""
        from optuna.trial import TrialState

        self._take_over_stale()
        # a taken-over run first: it resumes from its checkpoint, nearer its end than a fresh one
        waiting = sorted(
            self._trials((TrialState.WAITING,)), key=lambda t: ("takeover_of" not in t.user_attrs, t.number)
        )
        for t in waiting:
            if not self.storage.set_trial_state_values(t._trial_id, TrialState.RUNNING):
                continue  # another worker claimed it first
            claim = Claim(t._trial_id, t.number, t.user_attrs["run"])
            self.storage.set_trial_system_attr(claim.trial_id, "worker", self.worker)
            earlier = self._earlier_live_trial(claim, t.user_attrs.get(REDO_OF, -1))
            if earlier is None:
                return claim
            self.storage.set_trial_user_attr(claim.trial_id, "duplicate", f"of trial {earlier}")
            self.storage.set_trial_state_values(claim.trial_id, TrialState.FAIL)
        return None

    def _earlier_live_trial(self, claim: Claim, redo_of: int = -1) -> int | None:
        """The number of a lower-numbered trial of the same run that is RUNNING, COMPLETE or
        PRUNED (a sweep's pruned trial is done too), after trial `redo_of` (a redo's: `redo`)."""
        from optuna.trial import TrialState

        for t in self._trials((TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)):
            if t.user_attrs.get("run") == claim.run and redo_of < t.number < claim.number:
                return t.number
        return None

    def _take_over_stale(self) -> None:
        """Fail every stale RUNNING trial and enqueue its run again (module docstring)."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        now = time.time()
        for t in self._trials((TrialState.RUNNING,)):
            holder = t.system_attrs.get("worker", "")
            if not holder:  # claimed a moment ago, its holder not written yet: fresh for a while
                started = t.datetime_start.timestamp() if t.datetime_start is not None else now
                if now - started < UNRECORDED_HOLDER_S:
                    continue
            elif holder == self.worker or not self.holder_gone(holder):
                continue
            try:
                self.storage.set_trial_user_attr(
                    t._trial_id, "fail_reason", f"{HOLDER_GONE} ({holder or 'unrecorded'})"
                )
                self.storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            except UpdateFinishedTrialError:
                continue  # another worker took it over first
            # the same parameters again: a sweep's retry resumes the same configuration's runs
            attrs = {"run": t.user_attrs["run"], "takeover_of": t.number}
            if REDO_OF in t.user_attrs:  # a taken-over redo is still a redo
                attrs[REDO_OF] = t.user_attrs[REDO_OF]
            self.study.enqueue_trial(dict(t.params), user_attrs=attrs)

    def foreign_holds(self) -> dict[str, list[str]]:
        """Host -> runs RUNNING under a holder on another machine (which this machine cannot see:
        the local backend refuses such a queue)."""
        from optuna.trial import TrialState

        held: dict[str, list[str]] = {}
        for t in self._trials((TrialState.RUNNING,)):
            holder = t.system_attrs.get("worker", "")
            if holder and not is_here(holder):
                held.setdefault(holder_host(holder), []).append(t.user_attrs.get("run", f"trial {t.number}"))
        return held

    def pending(self) -> int:
        """Trials WAITING or RUNNING (runs that may still need a worker)."""
        from optuna.trial import TrialState

        return len(self._trials((TrialState.WAITING, TrialState.RUNNING)))

    # ---- ending ---------------------------------------------------------------------------
    def finish(self, claim: Claim, value: float, attrs: dict[str, Any]) -> bool:
        """Mark the run done (COMPLETE, with `value` and `attrs`; a NaN value, i.e. no score, is
        stored as -inf, which RDB storages accept); False when the trial had been taken over
        meanwhile (the run's own directory still holds what it did)."""
        return self._end(claim, "COMPLETE", float("-inf") if value != value else value, attrs)

    def drop_duplicate(self, claim: Claim, reason: str) -> bool:
        """End a claim whose run another live process is already doing (the run directory's
        lock said so): FAIL, marked as a duplicate, so it counts neither as the run's outcome
        nor as a failure to retry."""
        return self._end(claim, "FAIL", None, {"duplicate": reason})

    def fail(self, claim: Claim, reason: str) -> bool:
        """Mark the run failed, with the reason (not retried unless `ensure(retry_failed=True)`)."""
        return self._end(claim, "FAIL", None, {"fail_reason": reason})

    def _end(self, claim: Claim, state: str, value: float | None, attrs: dict[str, Any]) -> bool:
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        try:
            for key, v in attrs.items():
                self.storage.set_trial_user_attr(claim.trial_id, key, v)
            values = None if value is None else [value]
            self.storage.set_trial_state_values(claim.trial_id, TrialState[state], values)
        except UpdateFinishedTrialError:
            return False
        return True


def _failed_for_real(trial: Any) -> bool:
    """A FAIL that was the run's own (not a duplicate, not a takeover that was re-enqueued)."""
    from optuna.trial import TrialState

    return trial.state == TrialState.FAIL and not was_taken_over(trial)


def was_taken_over(trial: Any) -> bool:
    """Whether a FAIL trial was failed because its holder was gone (its run was enqueued again)."""
    return str(trial.user_attrs.get("fail_reason", "")).startswith(TAKEOVER_REASONS)
