"""The chat agent: its model, persona prompts, deps, tools, streaming and what it reads of files."""
