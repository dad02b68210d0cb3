"""Settings, the clock, the error hierarchy, bounded caches, usage metering and model prices."""
