"""Child side of `envs.sandbox`: set up isolation inside the fresh child process, then run the program.

Started by the parent as ``python -I -S -c BOOT CONFIG_JSON PROGRAM ARGS...`` in its own
session, with a minimal environment and the working directory as cwd; BOOT imports this module
from its directory (appended to sys.path, after the standard library), so its bytecode is
cached instead of compiled at every run. It runs with the harness's privileges (usually root)
only for the setup steps, then drops them. Steps, in the order they require:

1. tie to the harness: the parent-death signal SIGKILL, so that a `kill -9` of the harness
   kills this helper;
2. new namespaces (mount + IPC, pid, network; without root inside a user namespace) and the
   private filesystem view: own /tmp, /var/tmp, /dev/shm, hidden /run (`namespaces`); then
   wait until the harness has moved this process into the run's cgroups (root: total memory
   and task count), so that nothing the program does escapes them;
3. with a pid namespace: fork init (pid 1 of the namespace), which mounts the private /proc,
   applies the rlimits, drops privileges, ties itself to the helper (parent-death signal; it
   exits if the helper is already gone), installs the seccomp filter, arms a wall-clock alarm
   of its own, then forks the program and reaps orphans. When init ends, for whatever reason
   (program done, helper killed, alarm), the kernel kills everything left in the namespace,
   wherever it moved (setsid, double fork). The helper drops privileges too and waits.
   Without a pid namespace the helper applies the same limits, the parent-death signal (kept
   across exec: it reaches the program, not what the program starts) and the alarm to itself
   and execs the program.

Doing the setup in a separate small interpreter instead of a ``preexec_fn`` keeps the harness
safe to use from threads and leaves it untouched. ``--probe`` prints, as JSON, which of these
steps work on this machine (`capabilities()`). Standard library only.
"""

from __future__ import annotations

import json
import os
import signal
import sys

if __package__:  # imported as envs.sandbox.child (the harness)
    from . import limits as lim
    from . import namespaces as ns
else:  # imported as a top-level module by the child's BOOT line
    import limits as lim
    import namespaces as ns

SETUP_FAILED = 125  # exit status when the sandbox itself could not be set up


def setup(cfg: dict) -> bool:
    """Steps 1-2 (see the module docstring); True if a user namespace was created."""
    lim.tie_to_parent(cfg["parent"])
    # Python ignores SIGPIPE and SIGXFSZ and ignored signals survive exec: restore the
    # defaults so that e.g. `dd` is stopped by SIGXFSZ at the file size limit.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    userns = ns.enter_namespaces(cfg.get("mountns", False), cfg.get("pidns", False), cfg.get("netns", False))
    if cfg.get("mountns"):
        ns.private_mounts(
            cfg.get("keep", []), cfg.get("uid"), cfg.get("tmp"), cfg.get("hide_run", True), cfg.get("cover")
        )
    lim.wait_for_go(cfg.get("go_fd"))  # in the run's cgroups before anything else starts
    return userns


def confine(cfg: dict, userns: bool, parent: int | None) -> None:
    """Limits, dropped privileges, parent-death signal and seccomp filter for this process."""
    uid = cfg.get("uid")
    lim.set_limits(cfg, exact_nproc=uid is not None or os.geteuid() == 0 or userns)
    try:
        lim.no_new_privs()
    except OSError:
        pass
    if uid is not None:
        lim.drop_privileges(uid, cfg["gid"])
    lim.tie_to_parent(parent)  # after the uid change, which clears it
    if cfg.get("seccomp"):
        lim.deny_user_namespaces()


def _exec(argv: list[str]):
    """Replace this process with the program (exit like a shell: 127 not found, 126 other)."""
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(2, f"{argv[0]}: {exc.strerror}\n".encode())
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)


def run_init(cfg: dict, userns: bool, argv: list[str], status_w: int, alive_r: int):
    """Pid 1 of the namespace: finish the setup, fork the program, reap, report its status.

    The program is not pid 1 itself because pid 1 ignores default-action signals (SIGXCPU,
    SIGXFSZ, SIGINT, ...) and must reap orphans. `alive_r` reads EOF once the helper is gone.
    """
    try:
        if cfg.get("proc"):
            ns.mount_proc()
        confine(cfg, userns, parent=None)  # our parent (the helper) is outside: getppid() = 0
        lim.not_dumpable()  # the program (same uid) cannot ptrace or stop init
        os.set_blocking(alive_r, False)
        try:
            if os.read(alive_r, 1) == b"":  # EOF: the helper died before the signal was set
                os._exit(SETUP_FAILED)
        except BlockingIOError:
            pass
    except Exception as exc:
        os.write(2, f"sandbox setup failed: {exc}\n".encode())
        os._exit(SETUP_FAILED)

    def wall_exceeded(*_):  # a bound that holds even if the harness is stopped or stuck
        os.write(status_w, str(signal.SIGKILL).encode())  # reported as killed by SIGKILL
        os._exit(0)

    signal.signal(signal.SIGALRM, wall_exceeded)
    signal.alarm(cfg["wall"])
    program = os.fork()
    if program == 0:
        os.close(status_w)
        os.close(alive_r)
        _exec(argv)
    while True:  # reap everything; stop when the program itself has ended
        pid, status = os.wait()
        if pid == program:
            os.write(status_w, str(status).encode())
            os._exit(0)  # the kernel now kills the rest of the namespace


def supervise(cfg: dict, userns: bool, argv: list[str]):
    """Fork init (pid 1 of the new pid namespace) and end the way the program ended.

    The program's exact wait status travels back through a pipe, and this process ends the
    same way (same exit code or same signal).
    """
    r, w = os.pipe()
    alive_r, alive_w = os.pipe()  # this process holds alive_w until it dies
    init = os.fork()
    if init == 0:
        os.close(r)
        os.close(alive_w)
        run_init(cfg, userns, argv, w, alive_r)
    os.close(w)
    os.close(alive_r)
    try:
        if cfg.get("uid") is not None:
            lim.drop_privileges(cfg["uid"], cfg["gid"])
        lim.tie_to_parent(cfg["parent"])
    except OSError:
        os.kill(init, signal.SIGKILL)
        os._exit(SETUP_FAILED)
    for fd in (0, 1, 2):  # keep no copy of the pipes: EOF must come when the program ends
        os.dup2(os.open(os.devnull, os.O_RDWR), fd)
    data = os.read(r, 32)
    _, init_status = os.waitpid(init, 0)
    status = int(data) if data else init_status  # no data: init itself failed or was killed
    if os.WIFSIGNALED(status):
        if os.WTERMSIG(status) not in (signal.SIGKILL, signal.SIGSTOP):  # these have no handler
            signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
        os.kill(os.getpid(), os.WTERMSIG(status))
    os._exit(os.waitstatus_to_exitcode(status))


def _try(step) -> bool:
    """Run `step` in a forked child (so this process stays clean); True if it exited 0."""
    pid = os.fork()
    if pid == 0:
        try:
            step()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def probe(cfg: dict) -> dict[str, bool]:
    """Which isolation mechanisms work here; each is tried in its own throwaway child."""
    uid, gid, python, keep = cfg["uid"], cfg["gid"], cfg["python"], cfg["keep"]
    root, tmp = os.geteuid() == 0, {"size": 1 << 20, "inodes": 64}

    def private_tmp():
        ns.enter_namespaces(True, False, False)
        ns.private_mounts(keep, None, tmp)
        for d in ("/tmp", "/dev/shm"):
            # a kept path under d (a .venv under /tmp) is bound back into the private tmpfs:
            # the top directory leading to it is the one entry a private d may show
            leading = {os.path.relpath(k, d).split("/")[0] for k in keep if k.startswith(d + "/")}
            if set(os.listdir(d)) - leading:
                raise OSError(f"{d} is not private")

    def pid_namespace(proc: bool):
        ns.enter_namespaces(proc, True, False)
        if proc:
            ns.private_mounts(keep, None, None)

        def check():
            if proc:
                ns.mount_proc()
            if os.getpid() != 1 or (proc and [p for p in os.listdir("/proc") if p.isdigit()] != ["1"]):
                raise OSError("not alone in the new pid namespace")

        if not _try(check):
            raise OSError("the new pid namespace does not work")

    def unprivileged():
        ns.enter_namespaces(True, False, False)
        ns.private_mounts(keep, uid, tmp)
        lim.drop_privileges(uid, gid)
        if not os.access(python, os.X_OK) or not os.access(os.__file__, os.R_OK):
            raise OSError("the interpreter is not reachable by the unprivileged uid")

    def parent_protected():
        unprivileged()
        try:
            os.kill(os.getppid(), 0)  # signal 0: only checks permission, sends nothing
        except PermissionError:
            return
        raise OSError("can signal the parent")

    def user_namespaces_denied():
        lim.deny_user_namespaces()
        try:
            lim.call("unshare", ns.CLONE_NEWUSER)
        except PermissionError:
            if not _try(lambda: None):  # fork (clone) still works
                raise OSError("fork fails under the filter") from None
            import threading  # threads too: clone3 fails with ENOSYS, the C library falls back

            threading.Thread(target=lambda: None).start()
            return
        raise OSError("unshare(CLONE_NEWUSER) still succeeds")

    return {
        "rlimits": True,
        "network_namespace": _try(lambda: ns.enter_namespaces(False, False, True)),
        "mount_namespace": _try(lambda: ns.enter_namespaces(True, False, False)),
        "private_tmp": _try(private_tmp),
        "pid_namespace": _try(lambda: pid_namespace(False)),
        "private_proc": _try(lambda: pid_namespace(True)),
        "unprivileged_uid": root and _try(unprivileged),
        "parent_kill_protection": root and _try(parent_protected),
        "no_new_privs": _try(lim.no_new_privs),
        "user_namespaces_denied": _try(user_namespaces_denied),
        "parent_death_signal": _try(lambda: lim.tie_to_parent(None)),
    }


def main() -> None:
    """Entry point: probe, or set up and run the program (exit 125 if setup fails)."""
    cfg = json.loads(sys.argv[1])
    if cfg.get("probe"):
        print(json.dumps(probe(cfg)))
        return
    argv = sys.argv[2:]
    try:
        userns = setup(cfg)
        if not cfg.get("pidns"):
            confine(cfg, userns, parent=cfg["parent"])
            signal.alarm(cfg["wall"])  # kept across exec: SIGALRM ends the program at the bound
    except Exception as exc:  # report, never run the program half-isolated
        os.write(2, f"sandbox setup failed: {exc}\n".encode())
        os._exit(SETUP_FAILED)
    if cfg.get("pidns"):
        supervise(cfg, userns, argv)
    _exec(argv)


if __name__ == "__main__":
    main()
