"A W&B server stand-in on 127.0.0.1 that rejects every key, and records which keys it was sent."

import base64
import http.server
import threading


class RejectingServer:
    "Answers every request with 401 Unauthorized; `keys` holds the API keys seen in Basic auth headers."

    def __init__(self):
        self.keys = []
        keys = self.keys

        class Handler(http.server.BaseHTTPRequestHandler):
            def _reject(self):
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    user_key = base64.b64decode(auth[6:]).decode()
                    keys.append(user_key.split(":", 1)[1])
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                body = b'{"errors": [{"message": "user is not logged in"}]}'
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _reject

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
