"""`ToolEnv`: the multi-turn episode shared by tool-using tasks.

Each assistant turn either calls one tool (`envs.tools` format) or gives the final answer.
A call runs the named tool (async, so tool latency, sandboxes and tests of many episodes
overlap) and returns its output as the observation; a final answer is graded by `finish` and
ends the episode. Tool errors, unknown tools and malformed calls become observations that
tell the model what went wrong (and are counted in `info`), never exceptions; an exception
while grading the final answer ends the episode with reward 0 and `info["env_error"]`. A tool may end
the episode itself by returning `Final` (e.g. SWE's `submit`). After `max_tool_calls` calls
the next call is refused and the episode ends with reward 0.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from envs.base import Env, Message, StepResult
from envs.tools import MalformedToolCall, format_result, parse_tool_call


@dataclass
class Final:
    """Returned by a tool that ends the episode: its reward and diagnostics."""

    reward: float
    info: dict = field(default_factory=dict)


ToolFn = Callable[[str], Awaitable["str | Final"]]
"""A tool: async (argument text) -> output text, or `Final` to end the episode."""


class ToolEnv(Env):
    """A tool-using episode. Subclasses give `initial_messages`, `tools` and `finish`."""

    observation_role = "tool"

    def __init__(self, max_tool_calls: int = 16):
        """`max_tool_calls`: calls allowed per episode (the next one ends it, reward 0)."""
        self.max_tool_calls = max_tool_calls
        self.counts = {"tool_calls": 0, "tool_errors": 0, "malformed_calls": 0, "unknown_tools": 0}
        self.done = False

    @abstractmethod
    def initial_messages(self) -> list[Message]:
        """The messages that open the episode (system prompt listing the tools, the task)."""

    @abstractmethod
    def tools(self) -> dict[str, ToolFn]:
        """Tool name -> async function of the argument text."""

    @abstractmethod
    async def finish(self, action: str) -> Final:
        """Grade a final answer (a turn without a tool call)."""

    async def reset(self) -> list[Message]:
        """Start the episode: `initial_messages()`."""
        self.done = False
        return self.initial_messages()

    async def step(self, action: str) -> StepResult:
        """Run the tool the turn calls, or grade the final answer."""
        if self.done:
            raise RuntimeError("episode is already done")
        try:
            call = parse_tool_call(action)
        except MalformedToolCall as exc:
            self.counts["malformed_calls"] += 1
            return self._observe(f"error: {exc}")
        if call is None:
            try:
                final = await self.finish(action)
            except Exception as exc:  # like a tool's failure: the env's, it must not end the run
                final = Final(0.0, {"env_error": f"finish: {type(exc).__name__}: {exc}"[:500]})
            return self._end(final)
        if self.counts["tool_calls"] >= self.max_tool_calls:
            return self._end(Final(0.0, {"stopped": f"more than {self.max_tool_calls} tool calls"}))
        self.counts["tool_calls"] += 1
        tools = self.tools()
        if call.name not in tools:
            self.counts["unknown_tools"] += 1
            return self._observe(f"error: unknown tool {call.name!r}; available: {', '.join(sorted(tools))}")
        try:
            output = await tools[call.name](call.argument)
        except Exception as exc:  # a tool's failure is the agent's observation, not a crash
            self.counts["tool_errors"] += 1
            output = f"error: {exc}"
        if isinstance(output, Final):
            return self._end(output)
        return self._observe(output)

    def _observe(self, text: str) -> StepResult:
        return StepResult(observation=format_result(text), reward=0.0, done=False, info=dict(self.counts))

    def _end(self, final: Final) -> StepResult:
        self.done = True
        return StepResult(
            observation=None, reward=final.reward, done=True, info={**self.counts, **final.info}
        )
