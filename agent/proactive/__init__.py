"""Proactive follow-ups: plans from post-processing, the rules that keep them welcome, composition."""
