# The newcomer commands: `make run` (set up and run the bot), `make test` (set up and run the tests).
PYTHON ?= $(shell .ci/find-python)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup run chat migrate test lint bench
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: setup
	$(BIN)/python -m bot run

chat: setup
	$(BIN)/python -m bot chat

migrate: setup
	$(BIN)/python -m bot migrate

test: setup
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m bot bench turn
