"""A separate process sending one user's messages concurrently (used by the cross-process test)."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.core.settings import Settings
from agent.history.turn_notes import words
from agent.turn.service import TurnService
from db.engine import create_engine, session_factory


def _echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = next(words(p) for p in messages[-1].parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[TextPart(f"echo: {prompt}")])


async def main(url: str, user_id: int, prefix: str, count: int) -> None:
    settings = Settings(database_url=url, model="test", _env_file=None)
    engine = create_engine(url)
    service = TurnService(
        settings=settings, engine=engine, sessions=session_factory(engine), model=FunctionModel(_echo)
    )
    start = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
    await asyncio.gather(
        *(service.reply(user_id, f"{prefix}{i}", start + timedelta(seconds=i)) for i in range(count))
    )
    await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
