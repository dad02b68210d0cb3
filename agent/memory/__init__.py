"""What the bot knows about a person or a group: one list of facts, the profile, recall, tidying."""
