"""The repositories, one module per table or concept; none commits: the caller owns the transaction."""
