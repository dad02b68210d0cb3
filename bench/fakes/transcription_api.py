"""A local fake of an OpenAI-compatible /v1/audio/transcriptions endpoint (voice notes)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from types import TracebackType

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.fakes.serving import QuickServer
from bench.fakes.telegram_params import read_params


@dataclass(frozen=True)
class Transcription:
    """One request the fake answered: the form fields, the audio and the key it was sent with."""

    model: str
    filename: str
    audio: bytes
    authorization: str


class FakeTranscriber:
    """Answers every transcription with `text` (or a 500 while `failing`), as OpenAI's API shapes it."""

    def __init__(self, text: str = "hello from a voice note", *, api_key: str = "sk-test") -> None:
        self.text, self.api_key, self.failing = text, api_key, False
        self.requests: list[Transcription] = []
        app = Starlette(routes=[Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"])])
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", http="h11")
        self._server = QuickServer(config)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        serve = {"sockets": [self._sock]}
        self._thread = threading.Thread(target=self._server.run, kwargs=serve, daemon=True)

    @property
    def url(self) -> str:
        """The full endpoint URL (what TRANSCRIPTION_URL holds)."""
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1/audio/transcriptions"

    async def _transcribe(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            refused = {"message": "Incorrect API key", "type": "invalid_request_error"}
            return JSONResponse({"error": refused}, 401)
        params, files = await read_params(request)
        if "file" not in files or not params.get("model"):
            return JSONResponse({"error": {"message": "file and model are required"}}, 400)
        filename, audio, _ = files["file"]
        self.requests.append(
            Transcription(str(params["model"]), filename, audio, request.headers["authorization"])
        )
        if self.failing:
            return JSONResponse({"error": {"message": "server error", "type": "server_error"}}, 500)
        return JSONResponse({"text": self.text})

    def __enter__(self) -> FakeTranscriber:
        self._sock.bind(("127.0.0.1", 0))
        self._thread.start()
        deadline = time.monotonic() + 5
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake transcription server did not start")
            time.sleep(0.002)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._server.stop_soon()
        self._thread.join(timeout=5)
        self._sock.close()
