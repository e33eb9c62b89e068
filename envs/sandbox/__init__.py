"""Sandbox for model-generated code and shell commands (math tool calls, SWE test runs).

Every run starts a fresh child helper (`envs.sandbox.child`) in its own session, with a minimal
environment and its working directory as cwd; it sets up what the machine allows
(`Sandbox.capabilities()` says which) and then runs the program:

* rlimits: CPU seconds, address space, file size, process count (each per process), no cores;
* a wall-clock limit, enforced by the harness (SIGKILL to the process group, and with it the
  pid namespace) and again, 2 s later, by the namespace's init (an alarm), which holds when
  the harness is dead or stuck; without a pid namespace by an alarm the program inherits;
* death with the harness: helper and init get SIGKILL from the kernel when their parent dies
  (PR_SET_PDEATHSIG; the parent is the thread that started the run, i.e. the event loop's),
  and init's death ends the pid namespace. The next start of any Sandbox removes what a killed
  harness left: processes of free uid slots, their cgroups, owned working directories;
* a pid namespace with its own /proc: the program sees only its own processes, cannot signal
  any outside process (the harness), and everything it started ends with it, setsid escapees too;
* a mount and IPC namespace: private /tmp, /var/tmp and /dev/shm (one tmpfs of `disk_mb` and
  `max_files`, gone after each run, which also hides path-based Unix sockets there), an empty
  /run (system sockets; kept with `network=True`: DNS configuration lives there), root-only
  directories hidden, private SysV IPC and message queues;
* a network namespace with only its own loopback: no route to the host or the internet
  (abstract Unix sockets are per network namespace, so those are out of reach too);
* a view of the filesystem without the machine's data: every top-level directory except the
  system's (/usr, /lib, /bin, /sbin, /etc, /var, ...) is covered by an empty tmpfs (home
  directories, /opt, /srv, checkouts such as /work), and so are this project's source tree
  (its data files hold the benchmarks' answers) and the world-writable directories under /etc,
  /var and /run (what a run wrote there would outlive it); the interpreter and the working
  directory are bound back where a covering hid them (`probe.default_cover`);
* a seccomp filter: no new user namespaces (unshare/clone with CLONE_NEWUSER get EPERM), no
  kernel keys (add_key, request_key and keyctl get EPERM: keyrings are per uid, not per
  namespace, so a key would outlive the run);
* totals, where a cgroup is writable (root; cgroup v1, or v2 with the controllers delegated):
  memory of all processes together (and their tmpfs pages) and task count;
* a dedicated unprivileged uid/gid per `Sandbox` (root only). It makes the process limit work
  as root (the kernel ignores RLIMIT_NPROC for root), stops the program from reading root-only
  files (/root, /etc/shadow, 0700 directories) and from signalling root processes;
* as root, an owned working directory (`workdir=None`) is a tmpfs of `disk_mb`/`max_files`.

Threat model, by machine (what is NOT contained):

* root harness (this project's machines and CI): world-readable files under the system
  directories stay readable (/usr, /etc, /var: the installed software, not data);
  path-based Unix sockets under them stay reachable (except in /run); a file the
  program may write in a world-writable directory under /usr survives (none there on this
  project's machines); a caller-given `workdir` lives on the caller's filesystem, limited
  per file (`max_file_mb`), not in total; CPU time is per process (n processes may use n times
  `cpu_seconds` within the wall limit); the kernel is shared (this is not a VM). The dedicated
  uid has no passwd entry (`whoami` fails; git run by root in a workdir owned by it needs
  `safe.directory`).
* non-root with unprivileged user namespaces: namespaces, private /tmp, /proc (unless the
  machine masks parts of /proc, as some containers do: then `private_proc` is False and host
  processes are visible, though not signallable), seccomp and death with the harness as
  above, inside a user namespace that maps only the harness's uid. Not contained besides: no
  dedicated uid, so the program reads and writes whatever the harness's user can under the
  system directories and the kept paths; no cgroup totals (memory is per process: n processes may use n times
  `memory_mb`); an owned working directory is on disk, limited per file only.
* neither root nor user namespaces: rlimits, the wall limit, the minimal environment, and
  the parent-death signal and alarm on the program itself. Not contained: the filesystem (all
  the user can reach; /tmp and /dev/shm writes persist), the network, host processes (visible,
  signallable: the program can kill the harness), processes the program starts outlive a killed
  harness, the process limit is approximate (set above the user's task count), no totals.

Where a mechanism is missing the run goes ahead without it. Linux only; standard library only.

Modules (harness side: `sandbox`, `host`, `files`, `cgroup`, `probe`, `perf`; child side: `child`,
`namespaces`, `limits`):

* `sandbox`: `Sandbox`, `SandboxLimits`, `SandboxResult` (re-exported here): a run from its
  start to its result;
* `host`: uid slots, owned working directories, leftovers of killed harnesses, output capture,
  naming the limit behind an exit status;
* `files`: reading, writing, listing and removing what a run may have shaped (FIFOs, links,
  deep trees, locked directories) without blocking, following a link or recursing;
* `cgroup`: the memory and task totals of a Sandbox's runs;
* `probe`: what this machine provides (`Sandbox.capabilities()`) and the child's command line;
* `perf`: the sandbox's overhead per test run, for `bench perf --only sandbox`;
* `child`: the child helper, imported as a top-level module by ``python -I -S -c BOOT`` (this
  directory appended to sys.path, after the standard library); it sets up isolation, then runs
  the program;
* `namespaces`, `limits`: the child's namespaces and mounts; its rlimits, privileges, parent-death
  signal and seccomp filter.

The child side imports only the standard library and its two siblings, as top-level modules
(never this package, the rest of the project or site packages): keep it so.
"""

from envs.sandbox.sandbox import Sandbox, SandboxLimits, SandboxResult

__all__ = ["Sandbox", "SandboxLimits", "SandboxResult"]
