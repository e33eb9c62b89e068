"""SWE environments: SWE-bench-schema instances, runtimes (local sandbox, Docker), the agent scaffold.

Honest rewards: the threat model of SWE grading
===============================================
RL optimises whatever the grader pays for, so the grader treats the policy as an adversary.
It controls the model patch (any file, any content; a hand-made patch may hold binaries or
symlinks) and, while the tests run, everything the code under test does inside its process.
Trusted: the harness process, the instance (base commit, test patch, test lists), the git
directory (outside the sandbox), and the test runner's parent process, which never imports
repository code. The verdict is taken only from places the code under test cannot write to.

Grading (`envs.swe.runtime.Runtime.grade`), in order:

1. Reset (`envs.swe.grading.protected`): after the model patch is applied, whatever it changed
   among test files (`tests/` directories, test_*.py, *_test.py), files Python or pytest run
   unasked (conftest.py, sitecustomize.py, usercustomize.py, *.pth) and compiled modules
   (.pyc, .so, __pycache__) goes back to the base commit; then the test patch is applied last.
   SWE-bench resets only the test patch's own files; by its construction a gold patch holds no
   test file, so gold patches still resolve (checked for every swe-mini and many swe-synth bugs).
2. Diff scan (`envs.swe.grading.scan_patch`), in the harness: the lines the patch adds to the
   code under test, for the tools of runner tampering (frames, the module table, hooks,
   processes, file writes, dynamic code, the runner's protocol; symlinks, binaries, modules
   shadowing the standard library). The local runtime's repositories are tiny and pure, so
   any finding there means no reward (`LocalRuntime.scan_veto`); in real repositories those
   names are ordinary, so the Docker runtime only reports them.
3. The local test runner (`envs.swe.testrunner`, `envs.swe.testchild`), inside `envs.sandbox`:
   started with `python -I -S -B` (no site module: no .pth, no sitecustomize/usercustomize, no
   environment variables, no bytecode written); the parent reads each test file itself, runs it
   in a fresh child interpreter and decides every outcome from what the child reports under a
   token only that child was given; it makes itself undumpable, so a child cannot read its memory
   or reach its pipe to the harness. The child compiles the test file itself, calls only the
   functions compiled from it, reports through an audit hook installed before any repository
   code runs, and that hook ends the process on frame access, tracing, object-graph walks,
   ctypes, hand-made bytecode, new processes, /proc and writes to protected files.

Every signal (scan findings, what the guard caught) is in `PatchGrade.tamper` and in each
episode's `info["metrics"]["reward/tamper_suspect"]`, averaged per training step.

Not contained, and why (CPython cannot confine code inside its own process):

* The guard sees only audited operations. A signal handler receives the interrupted frame with
  no audit event, `_imp.create_builtin` re-creates modules unaudited, and from a frame code can
  replace the runner's closure cells (and, from Python 3.13, write its locals): so code under
  test that combines these can still forge the outcome of its own tests. A finalizer or signal
  handler running inside the guard itself could reach the child's token. A CPython memory-safety
  bug defeats all of it. The diff scan is text matching, so obfuscation can evade it; an attack
  has to evade both, and the scan flags every name those routes need (`signal`, `f_locals`,
  `__closure__`, `_imp`, `getattr(`, `exec(`, ...).
* Tests that are weak stay weak: special-casing the tested inputs, or returning objects that
  compare equal to anything, passes them, as it would in SWE-bench.
* Helper modules that tests import (not the test file itself) are read when imported; the guard
  refuses in-process writes to them, nothing refuses writes by a process that escaped it.
* Where the machine gives the sandbox no uid of its own (no root), tests run as the harness's
  uid: a child that escaped the guard could then reach anything that uid can (the workspace's
  git directory, other processes without a pid namespace). Without user or pid namespaces the
  guard (no new processes, no signals to others) and the undumpable parent are what stand in
  between; see `envs.sandbox` for what each machine provides.
* The Docker runtime resets test files the same way, but code under test runs inside pytest as
  root in the container and can print result lines the harness's log parser believes, as in the
  SWE-bench harness itself.
"""
