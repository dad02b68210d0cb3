"""One turn: the turn frame every surface plugs into, TurnService, the transcript writer, sessions,
turn serialisation and token budgets."""
