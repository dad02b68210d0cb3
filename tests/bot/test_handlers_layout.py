"""The handlers depend on the delivery's row and failures, never on the dispatcher that runs them."""

from __future__ import annotations

import ast

from tests.test_layout import ROOT, _imported


def test_handlers_do_not_import_the_dispatcher() -> None:
    handlers = sorted((ROOT / "bot" / "handlers").glob("*.py"))
    imports = {path.name: _imported(ast.parse(path.read_text(encoding="utf-8"))) for path in handlers}
    machinery = {"bot.delivery.dispatcher", "bot.delivery.polling"}
    offenders = {name: sorted(found & machinery) for name, found in imports.items() if found & machinery}
    assert offenders == {}
    # The scan reads the handlers: the message handlers import their context.
    assert "bot.handlers.context" in imports["messages.py"]
