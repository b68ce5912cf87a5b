"""A test double of the Hugging Face Hub's HTTP API, served on 127.0.0.1 for the test session.

It implements the part of the Hub protocol that the real ``huggingface_hub`` client uses to publish
and fetch a model repo, so the zoo's Hub path is tested end to end with the real client:

* ``POST /api/repos/create``                         create_repo (409 when it exists)
* ``GET  /api/models/{repo}[/revision/{rev}]``       repo_info / model_info (sha, siblings)
* ``GET  /api/models/{repo}/tree/{rev}``             list_repo_tree (used by snapshot_download)
* ``GET  /api/models/{repo}/refs``                   list_repo_refs
* ``POST /api/models/{repo}/preupload/{rev}``        upload modes (always "regular": no LFS, no Xet)
* ``POST /api/models/{repo}/commit/{rev}``           create_commit (NDJSON: header, file, deletedFile)
* ``POST /api/models/{repo}/tag/{rev}``              create_tag (409 when it exists)
* ``POST /api/validate-yaml``                         README metadata check (accepts everything)

Every request's body is read before it is answered, whatever the route (an unread body stays on a
keep-alive connection and corrupts the next response). ``HubState.read_bodies = False`` switches that
off, reading only where a route uses the body, so a test can show that it would fail without it.
* ``HEAD|GET /{repo}/resolve/{rev}/{path}``           file download with X-Repo-Commit / ETag headers

Errors carry the Hub's ``X-Error-Code`` header (RepoNotFound, RevisionNotFound, EntryNotFound), so
the client raises the same exception types as against huggingface.co. Clients must set
``HF_HUB_DISABLE_XET=1``: this server speaks no Xet. Everything lives in memory.

Beyond the protocol, :meth:`HubTestServer.set_online` makes the server refuse every request (as an
unreachable Hub would) without closing the port.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit


@dataclass
class Commit:
    oid: str
    files: dict[str, bytes]
    message: str


@dataclass
class Repo:
    repo_id: str
    commits: list[Commit] = field(default_factory=list)
    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        revision = unquote(revision)
        oid = self.branches.get(revision) or self.tags.get(revision)
        for commit in self.commits:
            if commit.oid == oid or (len(revision) >= 7 and commit.oid.startswith(revision)):
                return commit
        return None


def _git_blob_sha1(content: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


class HubState:
    """The repos held by the server."""

    def __init__(self) -> None:
        self.repos: dict[str, Repo] = {}
        self.lock = threading.Lock()
        self.online = True
        self.requests: list[str] = []
        #: Read every request body before answering (False: only where a route uses it, a mutation for tests).
        self.read_bodies = True

    def commit(self, repo: Repo, branch: str, message: str, changes: dict[str, bytes | None]) -> Commit:
        parent = repo.resolve(branch)
        files = dict(parent.files) if parent else {}
        for path, content in changes.items():
            if content is None:
                files.pop(path, None)
            else:
                files[path] = content
        seed = f"{repo.repo_id}{len(repo.commits)}{message}{time.time_ns()}".encode()
        commit = Commit(oid=hashlib.sha1(seed).hexdigest(), files=files, message=message)
        repo.commits.append(commit)
        repo.branches[branch] = commit.oid
        return commit


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # keep the test output clean
        pass

    # ------------------------------------------------------------------ plumbing
    @property
    def state(self) -> HubState:
        return self.server.state

    def _body(self) -> bytes:
        """The request body, read from the connection once."""
        if getattr(self, "_request_body", None) is None:
            if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
                self._request_body = self._read_chunked()
            else:
                length = int(self.headers.get("Content-Length") or 0)
                self._request_body = self.rfile.read(length) if length else b""
        return self._request_body

    def _read_chunked(self) -> bytes:
        chunks = []
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline().strip():  # trailers, up to the blank line
                    pass
                return b"".join(chunks)
            chunks.append(self.rfile.read(size))
            self.rfile.readline()  # the CRLF after each chunk

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, status: int, payload, headers: dict[str, str] | None = None, head: bool = False) -> None:
        self._send(status, json.dumps(payload).encode(), {"Content-Type": "application/json", **(headers or {})}, head)

    def _error(self, status: int, code: str | None, message: str, head: bool = False) -> None:
        headers = {"X-Error-Message": message}
        if code:
            headers["X-Error-Code"] = code
        self._json(status, {"error": message}, headers, head)

    def _repo(self, repo_id: str, head: bool = False) -> Repo | None:
        repo = self.state.repos.get(repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}.", head)
        return repo

    def _commit(self, repo: Repo, revision: str, head: bool = False) -> Commit | None:
        commit = repo.resolve(revision)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {unquote(revision)}", head)
        return commit

    def _dispatch(self, method: str) -> None:
        self._request_body = None  # one handler object serves every request of a keep-alive connection
        if self.state.read_bodies:
            self._body()
        self.state.requests.append(f"{method} {self.path}")
        if not self.state.online:
            self._error(503, None, "Hub offline (test server switched off)", method == "HEAD")
            return
        url = urlsplit(self.path)
        parts = [p for p in url.path.split("/") if p]
        query = parse_qs(url.query)
        with self.state.lock:
            if parts[:2] == ["api", "repos"] and method == "POST" and parts[2:] == ["create"]:
                return self._create_repo()
            if parts[:2] == ["api", "validate-yaml"]:
                return self._json(200, {"errors": [], "warnings": []})
            if parts[:2] == ["api", "models"] and len(parts) >= 4:
                return self._api_models(method, "/".join(parts[2:4]), parts[4:], query)
            if len(parts) >= 5 and parts[2] == "resolve" and method in ("GET", "HEAD"):
                return self._resolve("/".join(parts[:2]), parts[3], "/".join(unquote(p) for p in parts[4:]), method)
        self._error(404, None, f"no route for {method} {url.path}")

    do_GET = lambda self: self._dispatch("GET")  # noqa: E731
    do_HEAD = lambda self: self._dispatch("HEAD")  # noqa: E731
    do_POST = lambda self: self._dispatch("POST")  # noqa: E731
    do_PUT = lambda self: self._dispatch("PUT")  # noqa: E731
    do_DELETE = lambda self: self._dispatch("DELETE")  # noqa: E731

    # ------------------------------------------------------------------ routes
    def _create_repo(self) -> None:
        payload = json.loads(self._body() or b"{}")
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        if "/" not in repo_id:
            repo_id = f"test-user/{repo_id}"
        url = f"{self.server.endpoint}/{repo_id}"
        if repo_id in self.state.repos:  # the Hub's 409 carries the url too; create_repo(exist_ok=True) reads it
            return self._json(409, {"error": "You already created this model repo", "url": url})
        repo = Repo(repo_id=repo_id)
        self.state.repos[repo_id] = repo
        self.state.commit(repo, "main", "initial commit", {".gitattributes": b"*.safetensors filter=lfs\n"})
        self._json(200, {"url": url, "name": repo_id, "id": repo_id})

    def _api_models(self, method: str, repo_id: str, rest: list[str], query: dict) -> None:
        if method == "POST" and rest and rest[0] in ("preupload", "commit", "tag"):
            body = self._body()
        repo = self._repo(repo_id)
        if repo is None:
            return
        revision = unquote(rest[1]) if len(rest) > 1 else "main"
        if method == "GET" and (not rest or rest[0] == "revision"):
            commit = self._commit(repo, revision)
            if commit:
                self._json(200, self._model_info(repo, commit))
        elif method == "GET" and rest[0] == "tree":
            commit = self._commit(repo, revision)
            if commit:
                self._json(200, [self._tree_entry(path, data) for path, data in sorted(commit.files.items())])
        elif method == "GET" and rest[0] == "refs":
            self._json(200, {
                "branches": [
                    {"name": n, "ref": f"refs/heads/{n}", "targetCommit": o} for n, o in repo.branches.items()
                ],
                "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": o} for n, o in repo.tags.items()],
                "converts": [],
            })  # fmt: skip
        elif method == "POST" and rest[0] == "preupload":
            commit = repo.resolve(revision)
            files = json.loads(body)["files"]
            self._json(200, {"files": [
                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                 "oid": _git_blob_sha1(commit.files[f["path"]]) if commit and f["path"] in commit.files else None}
                for f in files
            ]})  # fmt: skip
        elif method == "POST" and rest[0] == "commit":
            self._create_commit(repo, revision, body)
        elif method == "POST" and rest[0] == "tag":
            commit = self._commit(repo, revision)
            if commit is None:
                return
            tag = json.loads(body)["tag"]
            if tag in repo.tags:
                return self._error(409, None, f"Tag {tag} already exists")
            repo.tags[tag] = commit.oid
            self._json(200, {"name": tag})
        else:
            self._error(404, None, f"no route for {method} {self.path}")

    def _create_commit(self, repo: Repo, branch: str, body: bytes) -> None:
        message, changes = "", {}
        for line in body.splitlines():
            item = json.loads(line)
            value = item["value"]
            if item["key"] == "header":
                message = value.get("summary", "")
            elif item["key"] == "file":
                content = value["content"]
                changes[value["path"]] = (
                    base64.b64decode(content) if value.get("encoding") == "base64" else content.encode()
                )
            elif item["key"] == "deletedFile":
                changes[value["path"]] = None
            else:
                return self._error(400, None, f"this test server does not support {item['key']!r} operations")
        if branch not in repo.branches:
            return self._error(404, "RevisionNotFound", f"Invalid rev id: {branch}")
        commit = self.state.commit(repo, branch, message, changes)
        self._json(
            200,
            {
                "success": True,
                "commitOid": commit.oid,
                "commitUrl": f"{self.server.endpoint}/{repo.repo_id}/commit/{commit.oid}",
            },
        )

    def _resolve(self, repo_id: str, revision: str, path: str, method: str) -> None:
        head = method == "HEAD"
        repo = self._repo(repo_id, head)
        if repo is None:
            return
        commit = self._commit(repo, revision, head)
        if commit is None:
            return
        if path not in commit.files:
            return self._error(404, "EntryNotFound", f"{path} does not exist at {revision}", head)
        content = commit.files[path]
        headers = {
            "X-Repo-Commit": commit.oid,
            "ETag": f'"{hashlib.sha256(content).hexdigest()}"',
            "Content-Type": "application/octet-stream",
        }
        self._send(200, content, headers, head=head)

    # ------------------------------------------------------------------ payloads
    def _tree_entry(self, path: str, data: bytes) -> dict:
        return {"type": "file", "path": path, "size": len(data), "oid": _git_blob_sha1(data)}

    def _model_info(self, repo: Repo, commit: Commit) -> dict:
        return {
            "_id": repo.repo_id,
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": commit.oid,
            "private": False,
            "disabled": False,
            "gated": False,
            "downloads": 0,
            "likes": 0,
            "tags": [],
            "lastModified": "2026-01-01T00:00:00.000Z",
            "createdAt": "2026-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": path} for path in sorted(commit.files)],
        }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: HubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state
        self.endpoint = f"http://127.0.0.1:{self.server_address[1]}"


class HubTestServer:
    """Start with :meth:`start`, point ``HF_ENDPOINT`` at :attr:`endpoint`, stop with :meth:`stop`."""

    def __init__(self) -> None:
        self.state = HubState()
        self._server = _Server(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return self._server.endpoint

    def start(self) -> HubTestServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def set_online(self, online: bool) -> None:
        """When False, every request gets HTTP 503, as from a Hub that is down."""
        self.state.online = online

    def file_bytes(self, repo_id: str, revision: str, path: str) -> bytes:
        """The content of a file in a repo (for assertions)."""
        return self.state.repos[repo_id].resolve(revision).files[path]
