"""A context snapshot as text for people: `/prompt` (admin, Telegram) and `/context` (terminal)."""

from __future__ import annotations

from typing import Any

TIER_LABELS = {
    "briefing": "briefing",
    "time": "time",
    "profile": "profile",
    "today": "today",
    "yesterday": "yesterday",
    "threads": "open threads",
    "last_conversation": "last conversation",
    "memory": "memory",
    "thoughts": "active thoughts",
    "week": "week summaries",
}


def _tier_line(name: str, tier: dict[str, Any]) -> str:
    label = TIER_LABELS.get(name, name)
    status = str(tier.get("status", "ok"))
    if tier.get("present"):
        line = f"  + {label:<18} {tier.get('count', 0):>3} items {tier.get('tokens', 0):>5} tok"
    else:
        line = f"  - {label:<18} {'':>3}       {'':>5}    "
    extras = [status] if status not in {"ok"} or not tier.get("present") else []
    if "ms" in tier:
        extras.append(f"{tier['ms']:.1f} ms")
    if tier.get("limits"):
        extras.append(f"limits {tier['limits']}")
    if isinstance(tier.get("facts"), list):
        extras.append(
            f"{len(tier['facts'])} facts, {tier.get('left_out_count', 0)} left out for the facts tier"
        )
    if tier.get("error"):
        extras.append(str(tier["error"]))
    return line + ("  (" + ", ".join(extras) + ")" if extras else "")


def _engine_lines(engine: dict[str, Any]) -> list[str]:
    """Which engine served, why v2 did not, and what shadow recorded beside v1."""
    if not engine:
        return []
    line = f"Engine: {engine.get('served', 'v1')} served (CONTEXT_ENGINE={engine.get('configured', 'v1')}"
    if engine.get("route") not in {None, engine.get("configured")}:
        line += f", this user: {engine['route']}"
    line += ")"
    if engine.get("reason"):
        line += f"; v2 not used: {engine['reason']}"
    lines = [line]
    for name in ("v1", "v2"):
        if isinstance(result := engine.get(name), dict):
            lines.append(
                f"  {name}: {result.get('total_tokens', 0)} tokens"
                f" ({result.get('instructions_tokens', 0)} instructions),"
                f" sections {', '.join(result.get('sections', []))}"
            )
    if isinstance(briefing := engine.get("briefing"), dict):
        checks = briefing.get("checks") or {}
        failed = [name for name, ok in checks.items() if not ok]
        lines.append(
            f"Briefing: written {briefing.get('written_at')} ({briefing.get('trigger')}),"
            f" text {briefing.get('text_tokens', 0)} / voice {briefing.get('voice_tokens', 0)} tokens,"
            f" checks {'failed: ' + ', '.join(failed) if failed else f'{len(checks)} passed'}"
        )
    return lines


def format_snapshot(snapshot: dict[str, Any]) -> str:
    """A compact, readable summary of one turn's context snapshot (older snapshots degrade gracefully)."""
    if not snapshot:
        return "(no context snapshot)"
    lines: list[str] = []
    total = snapshot.get("total_tokens")
    budget = snapshot.get("budget") or {}
    if total is not None:
        lines.append(
            f"Context: {total} tokens (budget {budget.get('total', '?')},"
            f" hard cap {budget.get('hard_cap', '?')}),"
            f" built in {snapshot.get('build_ms', 0):.1f} ms"
        )
    lines += _engine_lines(snapshot.get("engine") or {})
    history = snapshot.get("history") or {}
    sent = snapshot.get("message_history_count", history.get("sent_messages", 0))
    tokens = snapshot.get("message_history_tokens", history.get("tokens", 0))
    line = f"History: {sent} messages, {tokens} tokens"
    if history:
        line += f" (of {history.get('stored_messages', sent)} stored"
        if history.get("dropped_messages"):
            line += f"; {history['dropped_messages']} dropped"
        if history.get("trimmed_tool_outputs"):
            line += f"; {history['trimmed_tool_outputs']} tool outputs trimmed"
        line += ")"
    lines.append(line)
    compaction = history.get("compaction") or {}
    if compaction and compaction.get("status") not in {None, "not needed", "disabled"}:
        lines.append(
            f"Compaction: {compaction['status']}, summary of the first"
            f" {compaction.get('covered_messages', 0)}"
            f" messages ({compaction.get('summary_tokens', 0)} tokens)"
        )
    tiers = snapshot.get("tiers") or {}
    if tiers:
        lines.append("Tiers:")
        lines += [_tier_line(name, tier) for name, tier in tiers.items() if isinstance(tier, dict)]
    cuts = snapshot.get("cuts") or []
    if cuts:
        lines.append("Cut:")
        lines += [
            f"  {TIER_LABELS.get(c['tier'], c['tier'])}: {c['items']} items,"
            f" {c['tokens']} tokens ({c['reason']})"
            for c in cuts
        ]
    failures = snapshot.get("failures") or []
    if failures:
        lines.append("Failures:")
        lines += [f"  {f['tier']}: {f.get('status')} {f.get('error') or ''}".rstrip() for f in failures]
    if snapshot.get("model_failed"):
        lines.append("The model call failed; the user got the apology.")
    return "\n".join(lines)
