"""Reminders the user sets: their schedule in the user's zone, their store, and what happens to them."""
