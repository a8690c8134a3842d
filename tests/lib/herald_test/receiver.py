"""herald_test.receiver: an HTTP/1.1 server on loopback for the tests'
webhook receivers: every POST's body read and handed, with the request, to
the test's own answer."""
import http.server
import threading


class PostServer:
    """Serves on 127.0.0.1 (a free port: `port`) in a thread of its own,
    one thread per connection; POST(request, body) answers each POST (it
    sends the status, the headers and a body, Content-Length included).
    QUEUE is the listen backlog: a burst of connections beyond it is
    dropped and the SYN comes back a second later.  stop() ends it."""

    def __init__(self, post, queue=64):
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                post(self, self.rfile.read(int(self.headers.get("Content-Length", "0"))))

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = queue

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
