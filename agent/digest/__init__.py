"""The extraction and summary agents that the background jobs call."""
