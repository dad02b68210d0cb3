"""One turn: TurnService, the transcript writer, sessions, per-user locks and token budgets."""
