"""A local HTTP server on 127.0.0.1 standing in for the HF hub and the course repository."""
import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path




class FileServer:
    """HTTP server on 127.0.0.1 serving a dict path -> bytes, with Range support and fault injection:
    `cut[path] = n` sends a full Content-Length but closes after n bytes; `etag[path]` is announced
    as X-Linked-Etag (the HF hub's sha256 of an LFS file)."""

    def __init__(self):
        self.files, self.cut, self.etag, self.log = {}, {}, {}, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                server.log.append((self.path, self.headers.get("Range")))
                body = server.files.get(self.path)
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = 0
                rng = self.headers.get("Range")
                if rng:
                    start = int(rng.split("=")[1].split("-")[0])
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                else:
                    self.send_response(200)
                part = body[start:]
                self.send_header("Content-Length", str(len(part)))
                if self.path in server.etag:
                    self.send_header("X-Linked-Etag", f'"{server.etag[self.path]}"')
                self.end_headers()
                n = server.cut.pop(self.path, None)
                self.wfile.write(part if n is None else part[:n])
                self.wfile.flush()
                if n is not None:
                    self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def add_folder(self, prefix, folder, sha=True):
        for f in Path(folder).iterdir():
            data = f.read_bytes()
            self.files[f"{prefix}/{f.name}"] = data
            if sha and f.suffix in (".safetensors", ".bin"):
                self.etag[f"{prefix}/{f.name}"] = hashlib.sha256(data).hexdigest()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
