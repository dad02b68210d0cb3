"""Plain-text reports for /memory and the admin commands: memory, prompt, stats, usage, spend and access."""
