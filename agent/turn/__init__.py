"""One turn: TurnService, the transcript writer, sessions, turn serialisation and token budgets."""
