"""`bench profile` measures what a turn builds: the profile within its budget, the rest left for recall."""

from __future__ import annotations

from bench.profile import measure_profile


async def test_the_profile_benchmark_builds_the_profile_a_turn_builds() -> None:
    figures = await measure_profile("sqlite", facts=60, builds=2)

    assert len(figures["profile"]) == 2 and len(figures["later"]) == 3 and len(figures["recall"]) == 2
    chosen, left = figures["chosen"], figures["left_out"]
    assert isinstance(chosen, int) and isinstance(left, int)
    # Some facts are hidden or past plans: every other one is either in the profile or left out.
    assert chosen > 0 and 0 < chosen + left < 60
