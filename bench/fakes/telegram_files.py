"""Files users send, as the fake Bot API serves them: getFile, then a download from the file URL."""

from __future__ import annotations

import threading
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from bench.fakes.telegram_markup import bad_request

Json = dict[str, Any]
# Bots may download files of at most 20 MB (https://core.telegram.org/bots/api#getfile).
MAX_DOWNLOAD_BYTES = 20 * 1024 * 1024


class FileApi:
    """getFile and downloads for the bytes the tests attach to the updates they push."""

    token: str

    def _init_files(self) -> None:
        self._files_lock = threading.Lock()
        self._file_bytes: dict[str, bytes] = {}
        self._file_paths: dict[str, str] = {}
        self.downloads: list[str] = []  # file paths downloaded, in order

    def keep_file(self, file: Json, content: bytes) -> None:
        """Serve `content` for this file (its file_id) through getFile and the download URL."""
        with self._files_lock:
            file_id = file["file_id"]
            self._file_bytes[file_id] = content
            self._file_paths[f"files/{file_id}"] = file_id

    async def _api_getFile(self, p: Json, files: Any) -> Json:
        file_id = str(p.get("file_id", ""))
        with self._files_lock:
            content = self._file_bytes.get(file_id)
        if content is None:
            raise bad_request("invalid file_id")
        if len(content) > MAX_DOWNLOAD_BYTES:
            raise bad_request("file is too big")
        return {
            "file_id": file_id,
            "file_unique_id": f"u-{file_id}",
            "file_size": len(content),
            "file_path": f"files/{file_id}",
        }

    async def _download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return JSONResponse({"ok": False, "error_code": 401, "description": "Unauthorized"}, 401)
        path = request.path_params["path"]
        with self._files_lock:
            file_id = self._file_paths.get(path)
            content = self._file_bytes.get(file_id or "")
        if content is None:
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, 404)
        self.downloads.append(path)
        return Response(content, media_type="application/octet-stream")
