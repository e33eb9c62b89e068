"""The minimal SWE agent scaffold: `SweEnv`, a `ToolEnv` over a runtime's `Workspace`.

Tools (one call per turn, `envs.tools` format):

    view PATH [A-B]          the file with line numbers, `N:line` (lines A..B only with a range)
    search TEXT              fixed-string search over the repository: `path:N:line`, capped
    replace PATH N LINE      line N of PATH becomes LINE (other lines untouched); LINE may hold
                             newlines (one line becomes several) or be empty (a blank line)
    run_tests [ID ...]       the given tests (default: the instance's PASS_TO_PASS tests, the
                             ones visible at the base commit): one `ID STATUS` line each
    submit                   ends the episode: the workspace's diff is graded the SWE-bench way

A turn without a tool call counts as `submit`. Reward 1.0 iff the runtime's `grade` says
resolved; `info` carries `resolved`, `applied`, `patch`, the grader's `tamper` findings and the
files it `reset`, and `metrics` (averaged into each training step's metrics): every finished
episode reports `reward/tamper_suspect` (1.0 when the grader saw signs of tampering: the diff
scan, or conflicting reports from the test run) and `reward/test_files_reset` (1.0 when the
patch changed test, hook or compiled files that grading put back), 0.0 for episodes that were
never graded, so a run that learns to hack shows it in its curves. When the working copy cannot
be diffed (the model's code left something git cannot add) or grading fails, the episode ends
with reward 0 and `info["env_error"]` (counted per step as `rollout/env_failed`). So does an
episode whose runtime failed under it (`envs.swe.runtime.RuntimeUnavailable`: a workspace that
could not be opened, e.g. an image missing and not pullable, or one whose container died): its
first turn, or the tool call that found it, ends it, and the cause, naming the instance, is also
shown once as an `envs.base.EnvFaultWarning`.

Why so terse: the embedded tiny model is character-level with 1024 positions, so the prompt
(tools + file list + issue) stays under ~350 characters for a swe-mini instance and an episode
view -> replace -> submit fits in ~900 tokens. Observations are cut at `max_observation_chars`.

Lifecycle: `reset` opens the episode's own workspace (closing a previous one), `close` (called
by the loop after every episode) deletes it; `submit` releases it before grading, so an
episode never holds two working copies at once. Each env owns its workspace, so the 64
concurrent episodes of the loop share nothing but the runtime.
"""

from __future__ import annotations

import re
import warnings

from envs.base import Env, EnvFaultWarning, Message, StepResult
from envs.swe.instance import SWEInstance
from envs.swe.runtime import Runtime, RuntimeUnavailable, Workspace
from envs.tool_env import Final, ToolEnv, ToolFn

SYSTEM_PROMPT = (
    "Fix the issue. Tools: view PATH [A-B], search TEXT, replace PATH N LINE, run_tests [ID ...], submit\n"
)
"""The system message (ends with a newline: the tiny model sees messages concatenated)."""

MAX_FILE_LIST_CHARS = 160  # the "Files:" line is shown only for repositories this small
MAX_SEARCH_HITS = 20
_RANGE = re.compile(r"^(\d+)-(\d+)$")


def file_listing(paths: list[str]) -> str | None:
    """The "Files:" text, e.g. `a.py tests/test_a.py`: sources first, then tests; None when it would be too long."""
    ordered = sorted(paths, key=lambda p: (p.startswith("tests/") or "/tests/" in p, p))
    text = " ".join(ordered)
    return text if len(text) <= MAX_FILE_LIST_CHARS else None


def episode_metrics(tamper_suspect: bool, test_files_reset: bool) -> dict[str, float]:
    """The per-episode metrics of the module docstring."""
    return {
        "reward/tamper_suspect": float(tamper_suspect),
        "reward/test_files_reset": float(test_files_reset),
    }


def truncate(text: str, limit: int) -> str:
    """`text` cut to `limit` characters with a marker saying how much was dropped."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n...[{len(text) - limit} more chars; view a range A-B]"


def number_lines(text: str, first: int = 1, last: int | None = None) -> str:
    """Lines `first`..`last` (1-based, inclusive) of `text` as `N:line`, joined by newlines."""
    lines = text.splitlines()
    last = len(lines) if last is None else min(last, len(lines))
    return "\n".join(f"{n}:{lines[n - 1]}" for n in range(first, last + 1))


def replace_line(text: str, number: int, new: str) -> str:
    """`text` with line `number` (1-based) replaced by `new`; the file's final newline is kept.

    ValueError with the valid range when `number` is not a line of the file.
    """
    lines = text.splitlines()
    if not 1 <= number <= len(lines):
        raise ValueError(f"line {number} out of range; the file has lines 1-{len(lines)}")
    lines[number - 1 : number] = new.split("\n")
    return "\n".join(lines) + ("\n" if text.endswith("\n") else "")


class SweEnv(ToolEnv):
    """One SWE episode: the issue, a fresh working copy, the five tools, SWE-bench grading."""

    def __init__(
        self,
        instance: SWEInstance,
        runtime: Runtime,
        max_tool_calls: int = 10,
        max_observation_chars: int = 1000,
        system_prompt: str = SYSTEM_PROMPT,
    ):
        """`max_tool_calls`: see ToolEnv; `max_observation_chars`: cap on every tool output."""
        super().__init__(max_tool_calls=max_tool_calls)
        self.instance = instance
        self.runtime = runtime
        self.max_observation_chars = max_observation_chars
        self.system_prompt = system_prompt
        self.workspace: Workspace | None = None
        self._files: list[str] = []
        self._open_failed: RuntimeUnavailable | None = None

    # ---- lifecycle ------------------------------------------------------------------------
    async def reset(self):
        """Open a fresh workspace (closing any previous one) and return the opening messages; when
        the runtime cannot open one, the messages without the file list (the first step ends it)."""
        await self.close()
        self._open_failed, self._files = None, []
        try:
            self.workspace = await self.runtime.open(self.instance)
            self._files = await self.workspace.list_files()
        except RuntimeUnavailable as exc:
            await self.close()
            self._open_failed = exc
        return await super().reset()

    async def close(self) -> None:
        """Delete the workspace; safe to call any number of times."""
        workspace, self.workspace = self.workspace, None
        if workspace is not None:
            await workspace.close()

    def initial_messages(self):
        """System prompt (tools), then the file list (small repositories) and the issue."""
        listing = file_listing(self._files)
        files = f"Files: {listing}\n" if listing else ""
        issue = self.instance.problem_statement.strip()
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": f"{files}Issue: {issue}\n"},
        ]

    def tools(self) -> dict[str, ToolFn]:
        """The five tools of the module docstring (a runtime failure in one ends the episode)."""
        tools = {
            "view": self._view,
            "search": self._search,
            "replace": self._replace,
            "run_tests": self._run_tests,
            "submit": self._submit,
        }
        return {name: self._ending_on_fault(name, fn) for name, fn in tools.items()}

    def _ending_on_fault(self, name: str, tool: ToolFn) -> ToolFn:
        """`tool`, except that a failure of the runtime under it ends the episode (`fault`)."""

        async def call(argument: str):
            try:
                return await tool(argument)
            except RuntimeUnavailable as exc:
                await self.close()
                return self.fault(name, exc)

        return call

    def fault(self, stage: str, exc: Exception, patch: str = "") -> Final:
        """The end of an episode the environment failed at `stage`: reward 0, `env_error`; a
        runtime failure is also warned about (`EnvFaultWarning`, once per message)."""
        if isinstance(exc, RuntimeUnavailable):
            warnings.warn(
                f"{exc}; the episode is scored 0 (rollout/env_failed)", EnvFaultWarning, stacklevel=2
            )
        error = f"{stage}: {exc}"[:500]
        return Final(0.0, {"resolved": False, "applied": False, "patch": patch, "env_error": error})

    def _ws(self) -> Workspace:
        if self.workspace is None:
            raise RuntimeError("the episode has no workspace (reset it first)")
        return self.workspace

    def _cap(self, text: str) -> str:
        return truncate(text, self.max_observation_chars)

    # ---- tools ----------------------------------------------------------------------------
    async def _view(self, argument: str) -> str:
        parts = argument.split()
        if not 1 <= len(parts) <= 2:
            raise ValueError("usage: view PATH [A-B]")
        text = await self._ws().read_file(parts[0])
        first, last = 1, None
        if len(parts) == 2:
            match = _RANGE.match(parts[1])
            if not match or int(match.group(1)) < 1 or int(match.group(1)) > int(match.group(2)):
                raise ValueError(f"bad range {parts[1]!r}; use A-B with 1 <= A <= B")
            first, last = int(match.group(1)), int(match.group(2))
        shown = number_lines(text, first, last)
        if not shown:
            return (
                "(empty file)"
                if not text
                else f"no lines {first}-{last}; the file has {len(text.splitlines())}"
            )
        return self._cap(shown)

    async def _search(self, argument: str) -> str:
        if not argument.strip():
            raise ValueError("usage: search TEXT")
        workspace = self._ws()
        fast = getattr(workspace, "search", None)  # runtimes that can grep natively (docker)
        if fast is not None:
            hits = await fast(argument, MAX_SEARCH_HITS + 1)
        else:
            hits = []
            for path in await workspace.list_files():
                try:
                    text = await workspace.read_file(path)
                except (UnicodeDecodeError, ValueError):
                    continue  # binary or unreadable files are not searchable
                hits += [
                    f"{path}:{n}:{line}" for n, line in enumerate(text.splitlines(), 1) if argument in line
                ]
                if len(hits) > MAX_SEARCH_HITS:
                    break
        if not hits:
            return "no matches"
        more = f"\n...[more than {MAX_SEARCH_HITS} matches]" if len(hits) > MAX_SEARCH_HITS else ""
        return self._cap("\n".join(hits[:MAX_SEARCH_HITS]) + more)

    async def _replace(self, argument: str) -> str:
        # split on single spaces only: the LINE keeps its indentation ("f.py 2     return x")
        parts = argument.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ValueError("usage: replace PATH N LINE")
        path, number = parts[0], int(parts[1])
        workspace = self._ws()
        text = await workspace.read_file(path)
        await workspace.write_file(path, replace_line(text, number, parts[2] if len(parts) == 3 else ""))
        return "ok"

    async def _run_tests(self, argument: str) -> str:
        ids = argument.split() or list(self.instance.pass_to_pass)
        if not ids:
            return "no tests given and the instance has no PASS_TO_PASS tests"
        results = await self._ws().run_tests(ids)
        return self._cap("\n".join(f"{t} {results.get(t, 'NOT RUN')}" for t in ids))

    async def _submit(self, argument: str = "") -> Final:
        try:  # what the model's code left in the copy (a FIFO, a file git cannot add) may stop it
            patch = await self._ws().diff()
        except Exception as exc:
            await self.close()
            return self.fault("diff", exc)
        await self.close()  # release the working copy before grading opens a fresh one
        try:
            grade = await self.runtime.grade(self.instance, patch)
        except Exception as exc:  # the harness failed, not the model: end with reward 0, say why
            return self.fault("grade", exc, patch)
        info = {"resolved": grade.resolved, "applied": grade.applied, "patch": patch}
        info.update(tamper=list(grade.tamper), reset=list(grade.reset))
        info["metrics"] = episode_metrics(bool(grade.tamper), bool(grade.reset))
        return Final(reward=1.0 if grade.resolved else 0.0, info=info)

    async def step(self, action: str) -> StepResult:
        """`ToolEnv.step`; an episode whose workspace could not be opened ends at its first step
        (`fault`); one that ends without a grade (tool-call limit, harness error) still reports
        its metrics, as zeros, so that step means count every episode."""
        if self._open_failed is not None and not self.done:
            result = self._end(self.fault("open", self._open_failed))
        else:
            result = await super().step(action)
        if result.done and "metrics" not in result.info:
            result.info["metrics"] = episode_metrics(False, False)
        return result

    async def finish(self, action: str) -> Final:
        """A turn without a tool call: the model is done, so submit."""
        return await self._submit()


async def play(env: Env, actions: list[str]) -> tuple[list[Message], float]:
    """Run scripted `actions` through `env` (reset first, close at the end); the whole
    conversation, as `Task.demonstrations` returns it, and the final reward."""
    messages = list(await env.reset())
    reward = 0.0
    try:
        for action in actions:
            result = await env.step(action)
            messages.append({"role": "assistant", "content": action})
            if result.done:
                reward = result.reward
                break
            messages.append({"role": env.observation_role, "content": result.observation or ""})
    finally:
        await env.close()
    return messages, reward
