"""The chat agent: module-level, its instructions and tools, and the request laid out for caching.

A request reads, from the most stable to the least (the order a provider's prompt cache reads it):
the tools; PydanticAI's framing announcement (agent/core/caching.py); the persona and rules, the
same for every user of the bot (a literal instruction, given to each run, so PydanticAI sorts it
first and marks a cache breakpoint after it); this conversation's package (an instruction that appends
its changes to the history instead of rewriting the prefix, with the second breakpoint after it;
a change is sent ahead of the words of the turn it came in, agent/chat/changes.py);
the history; and last this turn's note and message, where the automatic breakpoint moves with the
conversation (agent/context/layers.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic_ai import Agent, FunctionToolset, RunContext, Tool
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.toolsets import ToolsetTool

from agent.chat.changes import ChangesFirst
from agent.chat.deps import TurnDeps
from agent.chat.fact_tools import fact_tools
from agent.chat.reminder_tools import reminder_tools
from agent.chat.tools import recall_tools
from agent.core.caching import CONVERSATION_TTL, Ttl, cache_settings
from agent.core.models import build_model
from agent.core.settings import Settings
from agent.history.turn_notes import words


class ListedOnce(FunctionToolset[TurnDeps]):
    """A function toolset that lists its tools once: none has a `prepare` function, so the listing
    PydanticAI asks for on each model request is the same every time, and building it again (a run
    context copied and a definition made for each tool) cost a run about 2,000 Python calls."""

    def __init__(self, tools: Sequence[Tool[TurnDeps]]) -> None:
        # By the run's default retries, the only thing of the run's a listing without `prepare` reads.
        self._listed: dict[int, dict[str, ToolsetTool[TurnDeps]]] = {}
        super().__init__(tools)

    def add_tool(self, tool: Tool[TurnDeps]) -> None:
        """Add a tool (the listing is made again)."""
        super().add_tool(tool)
        self._listed.clear()

    async def get_tools(self, ctx: RunContext[TurnDeps]) -> dict[str, ToolsetTool[TurnDeps]]:
        """The tools as listed the first time (a copy of the dict: PydanticAI may add to it)."""
        listed = self._listed.get(ctx.max_retries)
        if listed is None:
            if any(tool.prepare is not None for tool in self.tools.values()):
                return await super().get_tools(ctx)
            listed = self._listed[ctx.max_retries] = await super().get_tools(ctx)
        return dict(listed)


# The three modules' tools as one toolset, in their order: PydanticAI lists and copies every toolset's
# tools on each model request, and one toolset costs a run about 900 fewer Python calls than three.
chat_tools: FunctionToolset[TurnDeps] = ListedOnce(
    [*recall_tools.tools.values(), *reminder_tools.tools.values(), *fact_tools.tools.values()]
)

chat_agent: Agent[TurnDeps, str] = Agent(
    deps_type=TurnDeps,
    name="nikita",
    defer_model_check=True,
    toolsets=[chat_tools],
    # A change to the conversation's package is sent before the person's words (agent/chat/changes.py).
    capabilities=[ChangesFirst()],
)


@chat_agent.instructions(name="memory", on_change="append")
async def _conversation_package(ctx: RunContext[TurnDeps]) -> str:
    # The same text on every turn of a conversation until a source changes; a change is appended to the
    # history as a replacement, so the cached prefix stays (PydanticAI records the first value in
    # the conversation's first request), and it is sent ahead of that turn's words. Async: PydanticAI
    # runs a plain function in a worker thread, several times a run.
    return ctx.deps.package_text


def _offline_reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # Enough to try the memory without a key: it shows what the conversation's history holds.
    prompts = [words(p) for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    earlier = len(prompts) - 1
    return ModelResponse(
        parts=[
            TextPart(
                f"(offline test model) You said {prompts[-1]!r}; I see {earlier} earlier message(s) now."
            )
        ]
    )


def build_chat_model(settings: Settings) -> Model:
    """The chat model; `MODEL=test` is an offline echo (PydanticAI's TestModel would call every tool
    with made-up arguments, which is right for schema tests and wrong for trying the bot)."""
    if settings.model == "test":
        return FunctionModel(_offline_reply, model_name="offline-test")
    return build_model(settings.model, settings)


def chat_model_settings(settings: Settings, *, conversation_ttl: Ttl = CONVERSATION_TTL) -> ModelSettings:
    """Output cap, timeout and prompt caching for the chat model; the conversation's cache entry lives
    `conversation_ttl` (longer where turns come further apart)."""
    model_settings: ModelSettings = cache_settings(settings, conversation_ttl=conversation_ttl)
    model_settings["timeout"] = settings.model_timeout_seconds
    if settings.model_max_tokens is not None:
        model_settings["max_tokens"] = settings.model_max_tokens
    return model_settings
