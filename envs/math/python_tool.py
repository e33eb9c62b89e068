"""The "math with Python" episode: the model may run Python in a sandbox before answering.

As in the paper's tool-integrated math setting, each assistant turn either calls

    <tool>python
    CODE
    </tool>

(the shared `envs.tools` format; the code may span lines) or gives the final answer, which is
graded like the tool-free variant (`\\boxed{}`). Choices made here:

1. Every call runs CODE as a fresh `python -I snippet.py` in the episode's `Sandbox` (one per
   episode, created on the first call, removed by `Env.close`). Variables do not carry over
   between calls; files written in the working directory do. The system prompt says so.
2. The observation is `SandboxResult.as_observation()` (stdout, then stderr with the traceback,
   exit status, the limit that was hit) with the sandbox's working-directory prefix removed
   from paths (tracebacks then name `snippet.py`), cut to `max_observation_chars` by keeping
   its head and its tail: a traceback's useful part is its end.
3. A Markdown fence around the code (```python ... ```) is removed before running: pretrained
   models write one out of habit, and it would be a syntax error.
4. Default limits per call: 5 CPU seconds, 2 x CPU + 2 s of wall time, 512 MB of address
   space, 16 processes, 16 MB files, no network. BLAS/OpenMP pools are pinned to one thread
   (a big machine's default pool would spend the memory limit on thread buffers).
"""

from __future__ import annotations

import asyncio
import re
import sys

from envs.base import Grader, Message, Problem
from envs.sandbox import Sandbox, SandboxLimits
from envs.tool_env import Final, ToolEnv, ToolFn

DEFAULT_CPU_SECONDS = 5.0
"""CPU seconds per Python call (the wall limit is derived from it, see `python_limits`)."""

DEFAULT_OBSERVATION_CHARS = 2000
"""Longest observation text returned to the model (head and tail kept, middle cut)."""

_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?```\s*\Z", re.DOTALL)

SYSTEM_PROMPT = """\
You can run Python code to help you solve the problem. To run code, write
<tool>python
CODE
</tool>
and stop. The code runs in a fresh Python process (standard library and the installed \
packages, no network, a few seconds of CPU time); what it prints comes back as \
<result>OUTPUT</result>, so print what you need to see. Variables do not carry over between \
calls, files in the working directory do. You may call the tool at most {max_tool_calls} \
times. When you are done, reply without a tool call and put your final answer within \\boxed{{}}."""
"""System prompt of the tool variant (formatted with `max_tool_calls`)."""


def python_limits(cpu_seconds: float = DEFAULT_CPU_SECONDS) -> SandboxLimits:
    """Sandbox limits of one Python call (see the module docstring, point 4)."""
    return SandboxLimits(
        cpu_seconds=cpu_seconds,
        wall_seconds=2 * cpu_seconds + 2,
        memory_mb=512,
        max_processes=16,
        max_file_mb=16,
        max_output_chars=8000,
        network=False,
    )


def strip_code_fence(code: str) -> str:
    """`"```python\\nprint(1)\\n```"` -> `"print(1)"`; code without a surrounding fence is unchanged."""
    match = _FENCE.match(code)
    return match.group(1) if match else code


def truncate_middle(text: str, max_chars: int) -> str:
    """`text` if it fits in `max_chars`, else its head and tail around a `[... N chars cut ...]` line."""
    if len(text) <= max_chars:
        return text
    keep = max(max_chars - 40, 2)  # room for the marker line
    head, tail = text[: keep // 2], text[len(text) - (keep - keep // 2) :]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} chars cut ...]\n{tail}"


class PythonTool:
    """The `python` tool of one episode: runs code in a Sandbox created on the first call."""

    def __init__(self, limits: SandboxLimits, max_observation_chars: int = DEFAULT_OBSERVATION_CHARS):
        """`limits` apply to every call; observations are cut to `max_observation_chars`."""
        self.limits = limits
        self.max_observation_chars = max_observation_chars
        self.sandbox: Sandbox | None = None

    async def __call__(self, code: str) -> str:
        """Run `code`; return the (truncated) observation text. Limits hit are reported, not raised."""
        if self.sandbox is None:
            # The constructor may probe the machine's isolation once per process (a subprocess)
            # and scans for leftovers of its uid: keep that off the event loop.
            self.sandbox = await asyncio.to_thread(Sandbox, self.limits)
        result = await self.sandbox.arun(
            [sys.executable, "-I", "snippet.py"],
            files={"snippet.py": strip_code_fence(code)},
            env=_THREAD_ENV,
        )
        # Tracebacks name the script by its absolute path; the random workdir would only add noise.
        text = result.as_observation().replace(f"{self.sandbox.workdir}/", "")
        return truncate_middle(text, self.max_observation_chars)

    async def close(self) -> None:
        """Kill leftovers and delete the sandbox's working directory (no-op if never used)."""
        if self.sandbox is not None:
            await asyncio.to_thread(self.sandbox.close)  # scans /proc for the uid's processes


class MathToolEnv(ToolEnv):
    """One tool-integrated math episode: `python` calls, then a graded final answer.

    The reward is 1.0 when `grader` accepts the final turn, else 0.0; the (max_tool_calls+1)-th
    call ends the episode with reward 0 (`ToolEnv`). `info` adds `correct`, `extracted` and the
    grader's `method` to the tool counters.
    """

    def __init__(
        self,
        problem: Problem,
        grader: Grader,
        max_tool_calls: int,
        limits: SandboxLimits,
        max_observation_chars: int = DEFAULT_OBSERVATION_CHARS,
    ):
        """See the module docstring for the limits and the observation format."""
        super().__init__(max_tool_calls=max_tool_calls)
        self.problem = problem
        self.grader = grader
        self.python = PythonTool(limits, max_observation_chars)

    def initial_messages(self) -> list[Message]:
        """The system prompt documenting the tool, then the problem."""
        return [
            {"role": "system", "content": SYSTEM_PROMPT.format(max_tool_calls=self.max_tool_calls)},
            {"role": "user", "content": self.problem.prompt},
        ]

    def tools(self) -> dict[str, ToolFn]:
        """The one tool: `python`."""
        return {"python": self.python}

    async def finish(self, action: str) -> Final:
        """Grade the final answer against the problem's reference."""
        grade = self.grader(action, self.problem.answer)
        info = {"correct": grade.correct, "extracted": grade.extracted, "method": grade.method}
        return Final(1.0 if grade.correct else 0.0, info)

    async def close(self) -> None:
        """Release the episode's sandbox (its processes and working directory)."""
        await self.python.close()
