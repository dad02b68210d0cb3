"""Touchpoints, the messages the bot writes first: follow-ups planned by post-processing, check-ins
after a quiet spell, the rules that keep them welcome, and their composition. Reminders are the
third kind; they are the user's own and skip the rules and the model."""
