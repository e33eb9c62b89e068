"""The audit guard of the SWE runner's child (`envs.swe.testchild`): what the code under test may
not do in-process, and the one way results leave the child.

Not imported by the child: the local runtime sends this file's source followed by the child's
as one `python -I -S -B -c` program. `install` adds a `sys.addaudithook` hook before the first
line of repository code runs. CPython calls it on audited operations; it ends the process at
once (`os._exit`: no `except` or `finally` intercepts it) on the tools of in-process tampering:

* reading stack frames (`sys._getframe`, `sys._current_frames`, `tb_frame`, `gi_frame`, ...)
  outside the runner's own code and the stdlib functions that read only a module name (both
  trusted by code identity, never by file name);
* tracing, profiling, monitoring and new audit hooks; `gc` object walks; `ctypes`;
* hand-made bytecode: `code.__new__`, `marshal` (except importlib loading frozen modules),
  assigning `__code__`;
* new processes, signals to other processes, links;
* opening anything under /proc or /dev/fd, or through a path object; writing, renaming or
  removing a file grading protects (`envs.swe.grading.protected`) inside the repository.

Results leave only through the hook: the runner raises the audit event `REPORT`, and the hook
writes `<token> <WHAT> <hex detail>` only when the event comes from the installing function's
own frame at the bottom of the main thread's stack, at most once per requested id. The token
lives only in the hook's closure (the interpreter's hook list is the one reference to the hook),
which calls nothing code under test can rebind: builtins and helpers are bound to locals at
install, arguments checked to be exact built-in types. What CPython cannot stop in-process is
listed in `envs.swe`'s docstring.
"""

import _thread
import collections
import os
import sys

REPORT = "swe-testrunner.report"
"""The audit event through which `child` reports (the guard writes it out)."""
TAMPER_EXIT = 86
OUTCOMES = frozenset({"STARTED", "PASSED", "FAILED", "ERROR", "SKIPPED", "TAMPER"})
_FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys._current_exceptions"})
_FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_DENIED = frozenset(
    {
        "sys.settrace",
        "sys.setprofile",
        "sys.addaudithook",  # see every frame / every event
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",  # reach any object
        "code.__new__",
        "marshal.load",
        "marshal.loads",  # bytecode that need not be sane
        "os.symlink",
        "os.link",  # a link could lead a later write past the path checks
        "os.fork",
        "os.forkpty",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.system",
        "subprocess.Popen",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",  # processes, signals
    }
)
_DENIED_PREFIXES = ("ctypes.", "sys.monitoring.")
_DENIED_IMPORTS = frozenset(
    {"ctypes", "_ctypes", "_posixsubprocess", "_testcapi", "_testinternalcapi", "_xxsubinterpreters"}
)
_FS_EVENTS = ("os.rename", "os.remove", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.truncate")
_CONDITIONAL = frozenset({"import", "open", "object.__getattr__", "object.__setattr__", *_FS_EVENTS})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# What grading protects (envs.swe.grading.protected, which this source cannot import; a test
# checks that the two agree): test files, hooks Python or pytest run unasked, compiled modules.
_TEST_DIRS = frozenset({"tests", "test", "testing"})
_HOOK_NAMES = frozenset({"conftest.py", "sitecustomize.py", "usercustomize.py"})
_COMPILED = (".pyc", ".pyo", ".so", ".pyd", ".pth")
_WATCHED = _FRAME_EVENTS | _DENIED | _CONDITIONAL | {REPORT}


def _path_checks(root: str, type_=type, len_=len, any_=any, getcwd=os.getcwd):
    """(opens_badly(path, flags), changes_protected(args)) for the guard: whether an `open` may
    reach /proc or /dev/fd or write a protected file in `root`, and whether a rename, removal,
    mkdir, chmod, chown or truncate touches one. Closures over names bound now (C functions)."""
    root_parts = [p for p in root.split("/") if p]
    depth, test_dirs, hook_names, compiled, write_flags = (
        len_(root_parts),
        _TEST_DIRS,
        _HOOK_NAMES,
        _COMPILED,
        _WRITE_FLAGS,
    )

    def parts_of(path):
        """The absolute path's components with `.` and `..` folded, from its text alone (C string
        methods only); None for a path object (its `__fspath__` is code under test and may
        answer differently on each call)."""
        if type_(path) is bytes:
            path = path.decode("utf-8", "surrogateescape")
        elif type_(path) is not str:
            return None
        parts: list = []
        for part in (path if path.startswith("/") else getcwd() + "/" + path).split("/"):
            if part == "..":
                if parts:
                    parts.pop()
            elif part and part != ".":
                parts.append(part)
        return parts

    def protected(parts) -> bool:
        if parts is None:
            return True
        if parts[:depth] != root_parts or len_(parts) == depth:
            return False
        rel, name = parts[depth:], parts[-1]
        return (
            any_(part in test_dirs or part == "__pycache__" for part in rel[:-1])
            or name.startswith("test_")
            or name.endswith("_test.py")
            or name in hook_names
            or name.endswith(compiled)
            or name == "__pycache__"
        )

    def opens_badly(path, flags) -> bool:
        parts = parts_of(path) if type_(path) is not int else []
        if parts is None or parts[:1] == ["proc"] or parts[:2] == ["dev", "fd"]:
            return True
        return type_(flags) is int and flags & write_flags != 0 and protected(parts)

    def changes_protected(args) -> bool:
        return any_(protected(parts_of(p)) for p in args[:2] if type_(p) is not int)

    return opens_badly, changes_protected


def module_name_readers(root: str, source: str) -> frozenset:
    """Code objects of the stdlib functions that call `sys._getframe` only to read a module name
    (`collections.namedtuple`, `typing._caller`, enum's functional API): trusted by identity, not
    by file name (code under test can compile anything under any name). typing and enum are
    imported first if the test file or the repository's .py files mention them (else their
    import, several ms, is not paid, and an unannounced import of them is refused)."""
    text = [source]
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"]
        for path in (os.path.join(dirpath, n) for n in files if n.endswith(".py")):
            if os.path.isfile(path):  # not a FIFO: reading one would block
                with open(path, encoding="utf-8", errors="replace") as f:
                    text.append(f.read(1 << 16))
    for module in ("typing", "enum"):
        if any(module in chunk for chunk in text):
            __import__(module)
    enum_type = getattr(sys.modules.get("enum"), "EnumType", None)
    readers = (collections.namedtuple, getattr(sys.modules.get("typing"), "_caller", None))
    return frozenset(f.__code__ for f in (*readers, getattr(enum_type, "_create_", None)) if f is not None)


def _frozen_loader():
    """is_frozen_load(caller): whether a `marshal.loads` comes from importlib loading a frozen
    module (Python 3.13 audits it): bytecode built into the interpreter, as long as importlib's
    `_imp.get_frozen_object` is still the real one (checked on each call, C dict lookups only)."""
    boot, imp = sys.modules["_frozen_importlib"], sys.modules["_imp"]
    calls, get = boot._call_with_frames_removed.__code__, imp.get_frozen_object
    exec_module = boot.FrozenImporter.__dict__["exec_module"].__func__.__code__
    boot_dict, imp_dict = boot.__dict__, imp.__dict__

    def is_frozen_load(caller) -> bool:
        back = caller.f_back if caller.f_code is calls else None
        real = boot_dict.get("_imp") is imp and imp_dict.get("get_frozen_object") is get
        return back is not None and back.f_code is exec_module and real

    return is_frozen_load


def _checks(root: str, type_=type) -> dict:
    """Event -> whether its arguments make it matter, for the events of _CONDITIONAL (arguments
    come from C as exact built-in types; checked anyway: hashing a str subclass would run code
    under test inside the guard)."""
    opens_badly, changes_protected = _path_checks(root)
    denied_imports, frame_attrs = _DENIED_IMPORTS, _FRAME_ATTRS
    return {
        "import": lambda a: type_(a[0]) is str and a[0] in denied_imports,
        "open": lambda a: opens_badly(a[0], a[2]),
        "object.__getattr__": lambda a: type_(a[1]) is str and a[1] in frame_attrs,
        "object.__setattr__": lambda a: type_(a[1]) is str and a[1] == "__code__",
        **{event: changes_protected for event in _FS_EVENTS},
    }


def install(token: str, out: int, root: str, trusted: frozenset, readers: frozenset, results: int) -> None:
    """Install the audit hook of the module docstring. `trusted`: code objects
    of this runner that may read frames; `readers`: `module_name_readers`; `results`: how many
    results may be reported. The caller's frame chain is where reports may come from."""
    getframe, get_ident, write, exit_, type_, len_, str_ = (
        sys._getframe,
        _thread.get_ident,
        os.write,
        os._exit,
        type,
        len,
        str.__str__,
    )
    watched, frame_events, prefixes, outcomes = _WATCHED, _FRAME_EVENTS, _DENIED_PREFIXES, OUTCOMES
    report_event, tamper_exit, frozen_load, checks = REPORT, TAMPER_EXIT, _frozen_loader(), _checks(root)
    chain, frame = [], getframe(1)
    while frame is not None:
        chain.append(frame.f_code)
        frame = frame.f_back
    main_thread, prefix, inside, done = get_ident(), token + " ", set(), []
    attribute_events = ("object.__getattr__", "object.__setattr__")

    def line(what: str, detail: str) -> None:
        write(out, (prefix + what + " " + detail.encode("utf-8", "replace").hex() + "\n").encode())

    def where(frame) -> str:
        name = str_(frame.f_code.co_filename)
        return f"{name[len_(root) + 1 :] if name.startswith(root + '/') else name}:{frame.f_lineno}"

    def stop(why: str) -> None:
        line("TAMPER", why)
        exit_(tamper_exit)

    def is_report(caller, args) -> bool:
        f = caller
        for code in chain:  # child's frame, then the module's, then nothing
            if f is None or f.f_code is not code:
                return False
            f = f.f_back
        ok = f is None and get_ident() == main_thread and len_(done) < results and len_(args) == 2
        return ok and type_(args[0]) is str and type_(args[1]) is str

    def hook(event, args) -> None:
        if type_(event) is not str or event not in watched and not event.startswith(prefixes):
            return
        if event in checks and not checks[event](args):
            return
        me = get_ident()
        if me in inside:  # the event of the getframe just below
            return
        inside.add(me)
        try:
            caller = getframe(1)
        finally:
            inside.discard(me)
        if event == report_event:
            if not is_report(caller, args):
                stop("a result reported from outside the runner at " + where(caller))
            if args[0] not in outcomes or args[0] == "TAMPER":
                stop(args[1] or "the runner saw tampering")
            if args[0] != "STARTED":
                done.append(True)
            line(args[0], args[1])
            return
        if event in frame_events or event == "object.__getattr__":
            code = caller.f_code
            if code in trusted or code in readers and event == "sys._getframe":
                return
        if event == "marshal.loads" and frozen_load(caller):
            return
        what = args[0] if args and type_(args[0]) is str else ""  # a module or a path
        if event in attribute_events:
            what = args[1]  # checked to be a str by `checks`
        stop(f"{event} {what[:200]} at {where(caller)}".replace("  ", " "))

    sys.addaudithook(hook)
