"""The onboarding conversation that learns a new user's name, time zone and interests."""
