"""What the HTTP stand-ins share: a quiet JSON request handler and the
server loop (a threaded server on 127.0.0.1 that prints "PORT n" once it
listens, for with_standins.py and the self-test to read).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A handler that logs nothing (tests read the stand-in's own request
    log) and answers JSON; a subclass sets server_version and max_body."""
    protocol_version = "HTTP/1.1"
    max_body = 16 * 1024 * 1024  # a larger request body reads as empty

    def log_message(self, fmt, *args):
        pass

    def send(self, status, obj, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if 0 < n <= self.max_body else b""


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the client gave up waiting (a timeout test): not an error here
        super().handle_error(request, client_address)


def serve(port, handler, state):
    """Serve handler on 127.0.0.1:port (0: any free port) with
    server.state = state until interrupted; prints "PORT n" first."""
    srv = Server(("127.0.0.1", port), handler)
    srv.state = state
    print("PORT %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
