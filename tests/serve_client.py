"""serve_client.py: what the serve-*.py tests (tests/test-serve.sh) share:
JSON posted to a faultline server with its API key, and the count of
failed checks. The tests import it from their own folder."""
import json
import urllib.error
import urllib.request

failed = 0


class Server:
    """The server whose /v1 URL is base (as test-serve.sh passes it)."""

    def __init__(self, base, key):
        self.root, self.key = base.rsplit("/v1", 1)[0], key

    def post(self, path, body, raw=False, status=False, timeout=120):
        """body as JSON to the server's path ("/v1/completions", "/tokenize"):
        the reply's JSON, or its text (raw); with status, (HTTP status,
        reply), error replies included (else they raise)."""
        req = urllib.request.Request(self.root + path, data=json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.key,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                code, out = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            if not status:
                raise
            code, out = e.code, e.read().decode()
        out = out if raw else json.loads(out)
        return (code, out) if status else out


def check(ok, what):
    """Prints the check's line; a failed one is counted in failed."""
    global failed
    failed += not ok
    print(("ok: " if ok else "FAIL: ") + what)
