"""The profile tier (`<about_them>`): onboarding's answers, then the person's facts, in PROFILE_TOKENS.

Read as of the conversation's start like the conversation's other tiers, so it is the same text on every turn
of the conversation until a fact is taken back or changed (PydanticAI then delivers the change once).
The facts are chosen by agent/memory/profile.py within what the onboarding lines leave of the
budget; the block is checked whole against the budget, and any fact that would push it over joins
those left out, so nothing is cut silently: the snapshot lists both.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from agent.context.tiers import TierBlock, profile_block
from agent.core.tokens import TokenCounter
from agent.memory.profile import Profile, ProfileCache, load_profile, profile_line
from db.models import User

# The left-out facts a snapshot names by id at most (the count is always whole).
SNAPSHOT_LEFT_OUT_IDS = 200


@dataclass(frozen=True)
class ProfileTier:
    """The profile block and the choice of facts behind it."""

    block: TierBlock | None
    profile: Profile


async def load_profile_tier(
    session: AsyncSession,
    user: User,
    *,
    anchor: datetime,
    budget: int,
    counter: TokenCounter,
    profiles: ProfileCache | None = None,
) -> ProfileTier:
    """The owner's profile block as of `anchor`, within `budget` tokens (the choice kept in
    `profiles` between the conversation's turns, when given)."""
    base = profile_block(user)
    fixed = counter.count(base.render() if base is not None else "<about_them>\nAbout them:\n</about_them>")
    room = max(budget - fixed, 0)
    if profiles is not None:
        profile = await profiles.get(session, user.id, anchor=anchor, budget_tokens=room, count=counter.count)
    else:
        profile = await load_profile(session, user.id, anchor=anchor, budget_tokens=room, count=counter.count)
    chosen, left = list(profile.facts), list(profile.left_out)
    block = profile_block(user, profile.lines())
    # The joined text can tokenise differently from its pieces: verify, never assume.
    while chosen and block is not None and counter.count(block.render()) > budget:
        left.insert(0, chosen.pop())
        block = profile_block(user, [profile_line(f) for f in chosen])
    if len(chosen) != len(profile.facts):
        profile = replace(profile, facts=tuple(chosen), left_out=tuple(left))
    return ProfileTier(block, profile)


def profile_entry(profile: Profile) -> dict[str, Any]:
    """What the snapshot records of the profile's facts: which are in it, which were left out."""
    return {
        "facts": [f.id for f in profile.facts],
        "left_out": [f.id for f in profile.left_out[:SNAPSHOT_LEFT_OUT_IDS]],
        "left_out_count": len(profile.left_out),
        "facts_tokens": profile.tokens,
    }
