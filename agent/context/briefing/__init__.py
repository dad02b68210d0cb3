"""Context engine v2's briefing: written from the context package in idle time, checked before it is
stored, read on the turn's path while the package it was written from is still the turn's."""
