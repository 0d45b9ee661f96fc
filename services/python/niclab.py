"""niclab's API from Python, in one file with the standard library only (urllib, json).

    from niclab import Niclab
    lab = Niclab("http://127.0.0.1:8080")            # or NICLAB_API, and NICLAB_TOKEN
    job = lab.submit({"duration": 5, "flows": [{"from": {"agent": "A", "interface": "eth1"},
                                                "to": {"agent": "B", "interface": "eth1"}}]})
    job = lab.wait(job["id"])                         # follows the job's events to its end
    print(lab.report(job["id"], "table"))
    for summary in lab.results(agent="A", since="2026-11-01T00:00:00Z"):
        print(summary["finishedAt"], summary["flows"][0]["bitsPerSecond"])

Copy it next to your script, or put services/python on PYTHONPATH. Python 3.8 or later.
Errors the API states (a problem document: 4xx, 5xx) raise NiclabError with its fields.
"""

import http.client
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["Niclab", "NiclabError"]

TERMINAL = ("succeeded", "failed", "canceled")


class NiclabError(Exception):
    """A request the API refused: `status`, its problem document, and `errors` (field, message)."""

    def __init__(self, status, problem):
        self.status = status
        self.problem = problem
        self.errors = [(e.get("field"), e.get("message")) for e in problem.get("errors", [])]
        detail = problem.get("detail") or problem.get("title") or "HTTP %d" % status
        fields = "".join("\n  %s: %s" % e for e in self.errors)
        super().__init__("%s%s" % (detail, fields))


class Niclab:
    def __init__(self, base=None, token=None, timeout=30.0):
        self.base = (base or os.environ.get("NICLAB_API") or "http://127.0.0.1:8080").rstrip("/")
        self.token = token if token is not None else os.environ.get("NICLAB_TOKEN")
        self.timeout = timeout

    # -- HTTP ---------------------------------------------------------------------------
    def _open(self, method, path, body=None, accept="application/json", headers=None, timeout=None):
        request = urllib.request.Request(self.base + path, method=method)
        request.add_header("Accept", accept)
        if self.token:
            request.add_header("Authorization", "Bearer " + self.token)
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            request.add_header("Content-Type", "application/json")
        try:
            return urllib.request.urlopen(request, data, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as error:
            text = error.read().decode(errors="replace")
            try:
                problem = json.loads(text)
            except ValueError:
                problem = {"detail": text.strip() or error.reason}
            raise NiclabError(error.code, problem) from None

    def _json(self, method, path, body=None, headers=None):
        with self._open(method, path, body, headers=headers) as response:
            text = response.read()
            return json.loads(text) if text else None

    @staticmethod
    def _query(params):
        return urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})

    # -- jobs ---------------------------------------------------------------------------
    def submit(self, spec, idempotency_key=None):
        """Submits a job (a JobSpec as openapi.yaml states it); returns the job as queued."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._json("POST", "/v1/jobs", spec, headers)

    def job(self, job_id):
        return self._json("GET", "/v1/jobs/" + job_id)

    def jobs(self, status=None, limit=20):
        return self._json("GET", "/v1/jobs?" + self._query({"status": status, "limit": limit}))["items"]

    def cancel(self, job_id):
        return self._json("DELETE", "/v1/jobs/" + job_id)

    def agents(self):
        return self._json("GET", "/v1/agents")["items"]

    def events(self, job_id, last_event_id=None):
        """The job's server-sent events as (event, data, id) until the API ends the stream."""
        headers = {"Last-Event-ID": last_event_id} if last_event_id else None
        # No read timeout beyond the API's 15 s keep-alives: a quiet stream is not a dead one.
        with self._open("GET", "/v1/jobs/%s/events" % job_id, accept="text/event-stream", headers=headers, timeout=60) as response:
            fields = {}
            for raw in response:
                line = raw.decode().rstrip("\r\n")
                if line == "":
                    if "event" in fields and "data" in fields:
                        yield fields["event"], json.loads(fields["data"]), fields.get("id")
                    fields = {}
                elif not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value

    def wait(self, job_id, timeout=None, on_event=None, patience=120.0):
        """Follows the job to its final status and returns the finished job. `on_event(event,
        data)` hears each event. A lost connection is resumed with Last-Event-ID (nothing is
        missed) for up to `patience` seconds; `timeout` bounds the whole wait."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last_id = None
        lost_since = None
        while True:
            try:
                for event, data, event_id in self.events(job_id, last_id):
                    lost_since = None
                    last_id = event_id or last_id
                    if on_event:
                        on_event(event, data)
                    if event == "status" and data.get("status") in TERMINAL:
                        return self.job(job_id)
                    if deadline is not None and time.monotonic() > deadline:
                        raise TimeoutError("job %s did not end within %s s" % (job_id, timeout))
            except NiclabError as error:
                if error.status < 500:
                    raise
            except (OSError, urllib.error.URLError, http.client.HTTPException):
                # The connection went (refused, reset, a chunked body cut short): resume after the last id.
                pass
            lost_since = lost_since or time.monotonic()
            if time.monotonic() - lost_since > patience:
                raise ConnectionError("lost the niclab API at %s for %d s while following job %s" % (self.base, patience, job_id))
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("job %s did not end within %s s" % (job_id, timeout))
            time.sleep(0.25)

    def run(self, spec, **wait):
        """Submits and waits: the finished job."""
        return self.wait(self.submit(spec)["id"], **wait)

    # -- figures ------------------------------------------------------------------------
    def report(self, job_id, format="json"):
        """The job's report: a dict for json, the text for csv, table and svg."""
        path = "/v1/jobs/%s/report?format=%s" % (job_id, format)
        if format == "json":
            return self._json("GET", path)
        with self._open("GET", path, accept="*/*") as response:
            return response.read().decode()

    def compare(self, baseline, candidate, format="json", **params):
        """An A/B comparison of two jobs (minChangePercent=, metric=): a dict, or the text for table and svg."""
        path = "/v1/compare?" + self._query(dict(params, baseline=baseline, candidate=candidate, format=format))
        if format == "json":
            return self._json("GET", path)
        with self._open("GET", path, accept="*/*") as response:
            return response.read().decode()

    def results(self, since=None, until=None, page_size=1000, **filters):
        """Every run summary of the history in the range (agent=, interface=, schedule=,
        label="key=value"), oldest first, page after page (the API's cursor)."""
        params = dict(filters, limit=page_size)
        params["from"] = since
        params["to"] = until
        cursor = None
        while True:
            page = self._json("GET", "/v1/results?" + self._query(dict(params, cursor=cursor)))
            for summary in page["items"]:
                yield summary
            cursor = page.get("next")
            if not cursor:
                return
