"""One turn: the turn frame every surface plugs into, TurnService, the transcript writer, sessions,
per-user locks and token budgets."""
