"""A user's account and data: users, access rules, time zones, export, forget and the timeline."""
