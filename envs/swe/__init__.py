"""SWE environments: SWE-bench-schema instances, runtimes (local sandbox, Docker), the agent scaffold.

Honest rewards: the threat model of SWE grading
===============================================
RL optimises whatever the grader pays for, so the grader treats the policy as an adversary.
It controls the model patch (any file, any content; a hand-made patch may hold binaries or
symlinks) and, while the tests run, everything the code under test does inside the sandbox,
its whole process included: CPython cannot confine code inside its own process, so any secret
in that process is reachable (frames from a signal handler or a traceback, descriptors, memory).
The local grader is therefore built so that no secret its verdict depends on is in that process.
Trusted: the harness process, the instance (base commit, test patch, test lists) and the git
directory (outside the working copy and the sandbox).

Grading (`envs.swe.runtime.Runtime.grade`), in order:

1. The model patch is applied; the diff scan (`envs.swe.scan`) reads what git applied.
2. Reset (`envs.swe.grading.protected`): whatever the patch changed among test files (`tests/`
   directories, test_*.py, *_test.py), files Python or pytest run unasked (conftest.py,
   sitecustomize.py, usercustomize.py, *.pth) and compiled modules (.pyc, .so, __pycache__)
   goes back to the base commit; then the test patch is applied. SWE-bench resets only the test
   patch's own files; by its construction a gold patch holds no test file, so gold patches still
   resolve (every swe-mini instance and 60 swe-synth bugs, empty patches do not:
   tests/unit/envs/test_swe_mini.py, test_swe_synth.py; the scan finds nothing in 300 swe-synth
   gold patches: test_swe_scan.py).
3. The tests (local runtime, `envs.swe.local_runtime`). The harness rewrites each test file
   (`envs.swe.oracle`): every assertion becomes a check whose literals, operators and polarity
   stay in the harness, while the sandboxed run (`envs.swe.testchild`) computes only the values
   the assertion compares and sends them as plain data (JSON; no pickle, no object). The run
   gets the rewritten module as a code object without assertions, assertion messages or
   docstrings; the repository's test modules are moved out of the working copy while it runs;
   the sandbox covers this project's source tree (the datasets and their sources), the other
   top-level directories of the machine (other checkouts, home directories) and its private
   /tmp hides the workspace's git directory (`envs.sandbox`). The harness decides every outcome
   (`envs.swe.verdict`): a sealed test passes only when each of its checks was reported exactly
   once and holds on the reported values; the run's own word (an exception, a skip, an early
   end) can only fail a test; a second report of a check, or one of a check or test that does
   not exist, fails the test and is reported as tampering.

Every signal (scan findings, hook files reset, conflicting reports) is in `PatchGrade.tamper` and
in each episode's `info["metrics"]["reward/tamper_suspect"]`, averaged per training step.

What holds, and the tests that say so:

* A forger in the code under test that reaches the runner (frames from signal handlers,
  tracebacks, generators, coroutines, `sys._getframe`; every descriptor 0-255, /proc/self/fd,
  pipes) and reports every test as passed, with exactly the checks each test makes and guessed
  values, was not paid on the instances tried, the scan's veto off (swe-mini account-1, roman-1,
  find-1, a swe-synth bug: tests/unit/envs/test_swe_attacks.py): it does not know the expected
  values. Nor was code that looks for them in the test files, the datasets of this checkout
  or of others under /work, /home, /opt or /srv, or the git objects, nor code that ends or kills the run. Boolean expectations are the exception
  (below).
* swe-mini's 88 tests and those of 200 swe-synth bugs are sealed (the generator writes only
  `assert f(...) == literal`; tests/unit/envs/test_swe_oracle.py);
  grading does not resolve an instance on an unsealed test (test_swe_runner.py).
* The diff scan is a second line: it reads git's view of the change as Python reads it (the
  coding cookie, NFKC identifiers, tokens; paths and numeric modes from git), so fullwidth
  identifiers, a `utf-7` cookie, form feeds, a traditional diff naming a test file, a fake
  `+++` line and any spelling of a symlink mode are found (test_swe_scan.py). Through the agent's
  tools (`replace`, `submit`) forging patches, one of them in fullwidth letters, earn 0 with
  `reward/tamper_suspect` 1.0 (test_swe_attacks.py).

Not contained, and why:

* What a test checks is values: a patch that returns the expected values for the tested inputs
  (special-casing them) passes, as in SWE-bench; the issue text often states one of them, and
  swe-synth's tests are in the repository the model sees (test_swe_attacks.py shows it on
  purpose). An assertion without a literal operand keeps only its operator and polarity in the
  harness: `assert f(x)` or `assert f(a) == g(b)` is passed by a guess of one bit (a truthy
  value; equal values); an expected exception by naming its class (or a built-in ancestor).
* Boolean expectations of a test that fails at the base commit: code in the run that inverts
  every boolean reported for that test (the policy can learn in its episode which test fails)
  gets them right without a fix. The grader alone does not stop it; the scan's veto does, as
  it needs frames or the module table (test_swe_attacks.py pins both on swe-mini__overlap-1).
  2 of the 33 swe-mini instances and 22 of the first 100 swe-synth eval0 bugs expect only
  booleans of their FAIL_TO_PASS tests (test_swe_oracle.py counts them).
* That the statements between checks ran without an exception is the run's word; so is the
  whole outcome of an unsealed test (assertions in loops, branches or helpers, decorated tests,
  tests without an assertion), which grading never resolves on and which `run_tests` labels.
* Values are compared as plain data: a value of a type that is not plain data (a user class, a
  subclass of a built-in type) equals nothing, which is stricter than pytest.
* Where the machine gives the sandbox no mount namespace (neither root nor user namespaces),
  the run sees the whole filesystem of the harness's user, the datasets and the git directory
  included, and can reach the harness's processes: there the expected values are readable.
  Copies of the datasets outside the covered directories (under /usr, /etc, /var) stay
  readable, as does any world-readable data there.
* The Docker runtime resets test files the same way, but code under test runs inside pytest as
  root in the container and can print result lines the harness's log parser believes, or read the
  expected values from the test files on disk, as in the SWE-bench harness itself; its diff scan
  only reports (real repositories use those names). A patch swebench's rule resolves is graded
  again by the sealed tests in a fresh container (`envs.swe.docker_sealed`; test modules deleted,
  expected values kept in the harness) and is resolved only if both agree: on the offline
  instances (`envs.swe.docker_fixtures`) forged PASSED lines and an answer key read from the test
  files earn nothing there, while the official harness pays both, and a conftest.py hook that
  passes every report (tests/unit/envs/test_docker_daemon.py). The second opinion applies only
  where every FAIL_TO_PASS and PASS_TO_PASS test is sealed and the container's Python reads this
  one's code objects: not on most real SWE-bench instances (fixtures, parametrized ids), where
  swebench's rule stands alone. Inside the container the run can read the repository's git
  objects (the base test files, never the test patch).
"""
