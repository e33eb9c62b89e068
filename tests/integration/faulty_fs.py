"""`bench` with one directory faulty, where no file system can be mounted to make it so (CI
in a container; root, for whom permissions never fail):

    python -m tests.integration.faulty_fs ERRNO DIR BENCH_ARGS...

Below DIR, every open for writing, every new file and every new directory fails with ERRNO
(EACCES, EROFS), or for ENOSPC, every write fails the way a full disk's does: the directory
can be made, the write names no file. Only this process is faulty (not the workers it starts).
"""

from __future__ import annotations

import builtins
import errno
import io
import os
import sys

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def main() -> int:
    """Patch the file functions, then run `bench.cli.main` on the remaining arguments."""
    name, root, *argv = sys.argv[1:]
    code, root = getattr(errno, name), os.path.abspath(root)
    real_mkdir, real_open, real_os_open = os.mkdir, io.open, os.open

    def below(path) -> bool:
        if isinstance(path, int):
            return False
        path = os.path.abspath(os.fsdecode(os.fspath(path)))
        return path == root or path.startswith(root + os.sep)

    def fault(path) -> OSError:
        if code == errno.ENOSPC:
            return OSError(code, os.strerror(code))
        return OSError(code, os.strerror(code), os.fsdecode(os.fspath(path)))

    def mkdir(path, *args, **kwargs):  # a missing parent is still ENOENT, as the kernel answers
        if code != errno.ENOSPC and below(path) and os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise fault(path)
        return real_mkdir(path, *args, **kwargs)

    def open_(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and below(file):
            raise fault(file)
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        if flags & WRITE_FLAGS and below(path):
            raise fault(path)
        return real_os_open(path, flags, *args, **kwargs)

    os.mkdir, io.open, builtins.open, os.open = mkdir, open_, open_, os_open
    from bench.cli import main as bench

    return bench(argv)


if __name__ == "__main__":
    sys.exit(main())
