"""Conversation recall: full-text and vector indexes over the transcript and day summaries."""
