"""A queue of named runs in an Optuna storage, the one record of who holds which run for both
scheduler backends (`sweeps.scheduler`): the local workers of one machine, or the driver of a
Ray cluster. Each run is done exactly once, and a dead holder's run is taken over.

Why Optuna: sweeps need a study in an Optuna storage anyway: a journal file by default
(file-locked appends), or an RDB (PostgreSQL) to keep the studies in a database. Several
machines are a Ray cluster's business (`--cluster ray`); workers on several hosts sharing an RDB
queue still work through the leases below, but that is no longer the documented way.

Each run of a comparison (or trial of a sweep) is a trial whose user attribute `run` names it:

* **Claim**: a worker takes the lowest-numbered WAITING trial by setting it RUNNING; the
  storage lets exactly one worker win that transition (RDB: a row lock; journal: the order
  of the log).
* **Lease**: the claiming worker renews `lease_until` (a trial system attribute) every
  `lease_s / 3` seconds (a trial claimed so recently that its first lease is not written yet
  counts from its start). A RUNNING trial whose lease has run out, or whose worker is a
  process of this host that no longer exists, is *stale*: the next worker marks it FAIL
  ("lease expired") and enqueues a new trial for the same run, which resumes the run from its
  last checkpoint. Leases compare wall clocks of different machines: keep them in sync (NTP);
  the default lease, 90 s, tolerates seconds of skew.
* **Exactly once**: several workers may take over the same stale trial at once (the journal
  lets each one believe it succeeded) or enqueue the same run twice; a claimed trial whose run
  already has a lower-numbered trial RUNNING or COMPLETE is a duplicate, failed at once
  without running. A finished run is never repeated. The run directory's lock
  (`results.rundir.RunDir.lock`) is the last guard: two processes never train one run.

Only `optuna.storages` public methods are used (get_all_trials, set_trial_state_values,
set_trial_*_attr), so any Optuna storage works.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeps.errors import ExperimentError

LEASE_S = 90.0
"""Default lease of a claimed run (seconds without a renewal before others take it over)."""


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


def is_dead_here(worker: str) -> bool:
    """Whether `worker` (a `worker_id`) is a process of this host that no longer exists."""
    host, boot, pid, start = (worker.split(":") + ["", "", "", ""])[:4]
    if host != socket.gethostname() or boot != _boot_id() or not pid.isdigit():
        return False  # another machine's (or another boot's) worker: only its lease can tell
    return _start_time(int(pid)) != start


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
        lease_s: float = LEASE_S,
        direction: str = "maximize",
        sampler: Any = None,
        pruner: Any = None,
    ) -> None:
        import optuna

        # the storage Optuna's own objects use (an RDB storage wrapped in its cache): a Trial built
        # on a trial this queue claimed must find it there
        self.storage, self.lease_s = optuna.storages.get_storage(storage), lease_s
        self.study = optuna.create_study(
            storage=self.storage,
            study_name=study_name,
            load_if_exists=True,
            direction=direction,
            sampler=sampler,
            pruner=pruner,
        )
        self.worker = worker_id()
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
        for t in sorted(self._trials((TrialState.WAITING,)), key=lambda t: t.number):
            if not self.storage.set_trial_state_values(t._trial_id, TrialState.RUNNING):
                continue  # another worker claimed it first
            claim = Claim(t._trial_id, t.number, t.user_attrs["run"])
            self.renew(claim)
            earlier = self._earlier_live_trial(claim)
            if earlier is None:
                return claim
            self.storage.set_trial_user_attr(claim.trial_id, "duplicate", f"of trial {earlier}")
            self.storage.set_trial_state_values(claim.trial_id, TrialState.FAIL)
        return None

    def _earlier_live_trial(self, claim: Claim) -> int | None:
        """The number of a lower-numbered trial of the same run that is RUNNING, COMPLETE or
        PRUNED (a sweep's pruned trial is done too)."""
        from optuna.trial import TrialState

        for t in self._trials((TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED)):
            if t.user_attrs.get("run") == claim.run and t.number < claim.number:
                return t.number
        return None

    def _take_over_stale(self) -> None:
        """Fail every stale RUNNING trial and enqueue its run again (module docstring)."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState

        now = time.time()
        for t in self._trials((TrialState.RUNNING,)):
            lease = t.system_attrs.get("lease_until")
            if lease is None:  # claimed a moment ago, its first lease not written yet: it is fresh
                started = t.datetime_start.timestamp() if t.datetime_start is not None else now
                lease = started + self.lease_s
            holder = t.system_attrs.get("worker", "")
            if lease > now and not (holder and is_dead_here(holder)):
                continue
            try:
                self.storage.set_trial_user_attr(t._trial_id, "fail_reason", f"lease expired ({holder})")
                self.storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            except UpdateFinishedTrialError:
                continue  # another worker took it over first
            # the same parameters again: a sweep's retry resumes the same configuration's runs
            self.study.enqueue_trial(
                dict(t.params), user_attrs={"run": t.user_attrs["run"], "takeover_of": t.number}
            )

    def pending(self) -> int:
        """Trials WAITING or RUNNING (runs that may still need a worker)."""
        from optuna.trial import TrialState

        return len(self._trials((TrialState.WAITING, TrialState.RUNNING)))

    def renew(self, claim: Claim) -> None:
        """Extend this worker's lease on `claim`."""
        self.storage.set_trial_system_attr(claim.trial_id, "worker", self.worker)
        self.storage.set_trial_system_attr(claim.trial_id, "lease_until", time.time() + self.lease_s)

    def keep_alive(self, claim: Claim) -> threading.Event:
        """Renew the lease every `lease_s / 3` s in a thread until the returned event is set."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_s / 3):
                try:
                    self.renew(claim)
                except Exception:  # a finished trial (taken over) or a storage hiccup: stop quietly
                    return

        threading.Thread(target=beat, name=f"lease-{claim.run}", daemon=True).start()
        return stop

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

    reason = str(trial.user_attrs.get("fail_reason", ""))
    return trial.state == TrialState.FAIL and not reason.startswith("lease expired")
