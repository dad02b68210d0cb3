"""The HTTP surface: the webhook, /healthz, /tasks/*, the voice endpoints and the timeline Mini App."""
