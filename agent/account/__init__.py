"""A user's account and data: users, access, rate limits, time zones, export, forget, the timeline."""
