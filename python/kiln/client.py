"""The tracker's client: upload and tune models, watch and fetch jobs, list
the farm. Every gRPC error surfaces as kiln.KilnError(code, message)."""
import hashlib
import os
import socket
import time

import grpc

from kiln.errors import JobFailed, KilnError
from kiln.v1 import common_pb2, tracker_pb2, tracker_pb2_grpc

CHUNK = 1 << 20  # bytes per upload message, as the CLI sends
_FINAL = {"completed", "failed", "cancelled"}


def _state_name(state):
    return tracker_pb2.JobState.Name(state).removeprefix("JOB_STATE_").lower()


def _call(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except grpc.RpcError as e:
        raise KilnError(e.code().name, e.details()) from None


class Job:
    """A job on the tracker. `id`; `info()` is its latest state as a dict."""

    def __init__(self, client, job_id):
        self._client = client
        self.id = job_id

    def __repr__(self):
        return f"Job({self.id!r})"

    def info(self):
        return _job_dict(_call(self._client._stub.GetJob, tracker_pb2.GetJobRequest(job_id=self.id),
                               metadata=self._client._metadata))

    @property
    def state(self):
        return self.info()["state"]

    def wait(self, progress=True, timeout=None):
        """Follows the job (the WatchJob stream) until it ends; with
        `progress`, a progress bar of its trials with the best estimated
        latency. Returns info(); raises JobFailed when it failed or was
        cancelled, KilnError on a transport error."""
        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=0, unit="trial", desc=self.id)
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        try:
            # A stream that ends before the job does (the tracker restarted,
            # say) is opened again.
            while last is None or last["state"] not in _FINAL:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise KilnError("DEADLINE_EXCEEDED", f"job {self.id} did not end in time")
                stream = self._client._stub.WatchJob(tracker_pb2.WatchJobRequest(job_id=self.id),
                                                     metadata=self._client._metadata,
                                                     timeout=left)
                for event in stream:
                    last = _job_dict(event.job)
                    if bar is not None:
                        bar.total = max(last["trials"], 1)
                        bar.n = last["trials_done"]
                        best = last["best_latency_ms"]
                        bar.set_postfix_str(f"{last['state']}, best {best:.3f} ms" if best else
                                            last["state"], refresh=False)
                        bar.refresh()
                    if last["state"] in _FINAL:
                        break
                if last is None or last["state"] not in _FINAL:
                    last = self.info()
                    if last["state"] not in _FINAL:
                        time.sleep(0.2)
        except grpc.RpcError as e:
            raise KilnError(e.code().name, e.details()) from None
        finally:
            if bar is not None:
                bar.close()
        if last["state"] != "completed":
            raise JobFailed(last, "FAILED_PRECONDITION",
                            f"job {self.id} {last['state']}: {last['error'] or 'no artifact'}")
        return last

    def fetch(self, path, insecure=False):
        """Downloads the job's artifact to `path`, checking its SHA-256
        (DATA_LOSS when it differs: nothing is left at `path`). An artifact
        is native code: from another machine it comes over TLS (the Client's
        `tls_ca`), unless `insecure` says otherwise, as `kiln fetch` does."""
        if not self._client._tls and not _all_loopback(self._client.address) and not insecure:
            raise KilnError("FAILED_PRECONDITION",
                            f"refusing to fetch native code from {self._client.address} over an "
                            "unencrypted connection (anyone on the way could replace it and its "
                            "checksum): pass tls_ca to the Client, or insecure=True")
        digest = hashlib.sha256()
        expected = ""
        tmp = f"{path}.part"
        try:
            with open(tmp, "wb") as f:
                stream = self._client._stub.FetchArtifact(
                    tracker_pb2.FetchArtifactRequest(job_id=self.id),
                    metadata=self._client._metadata)
                for chunk in stream:
                    if chunk.offset != f.tell():
                        raise KilnError("DATA_LOSS", f"artifact chunk at {chunk.offset}, "
                                                     f"expected {f.tell()}")
                    f.write(chunk.data)
                    digest.update(chunk.data)
                    if chunk.sha256:
                        expected = chunk.sha256
            if not expected or digest.hexdigest() != expected:
                raise KilnError("DATA_LOSS", f"artifact of {self.id}: SHA-256 "
                                             f"{digest.hexdigest()} != the tracker's {expected!r}")
            os.replace(tmp, path)
        except grpc.RpcError as e:
            raise KilnError(e.code().name, e.details()) from None
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        return path

    def cancel(self):
        return _job_dict(_call(self._client._stub.CancelJob,
                               tracker_pb2.CancelJobRequest(job_id=self.id),
                               metadata=self._client._metadata))


def _latency_dict(l):
    return {"median_ms": l.median_s * 1e3, "p25_ms": l.p25_s * 1e3, "p75_ms": l.p75_s * 1e3,
            "rounds": l.rounds}


def _end_to_end_dict(e):
    """The whole model as the board measured it (empty before the job has)."""
    if not e.curve and not e.note:
        return {}
    return {"untuned": _latency_dict(e.untuned), "tuned": _latency_dict(e.tuned),
            "returned_tuned": e.returned_tuned, "note": e.note,
            "tasks_tuned": e.tasks_tuned, "tasks_reverted": e.tasks_reverted,
            "threads": e.threads,
            "curve": [{"trials": p.trials, "untuned": _latency_dict(p.untuned),
                       "tuned": _latency_dict(p.tuned)} for p in e.curve]}


def _job_dict(j):
    tasks = [{"workload": t.workload.key, "op": t.workload.op, "trials": t.trials_done,
              "errors": t.errors, "best_cost_s": t.best_cost_s, "runs": t.occurrences,
              "state": t.state} for t in j.tasks]
    return {"id": j.job_id, "model": j.model_name, "key": j.device_key, "target": j.target.spec,
            "state": _state_name(j.state), "trials": j.trials, "trials_done": j.trials_done,
            "tasks": tasks, "best_latency_ms": j.estimated_latency_s * 1e3, "error": j.error,
            "artifact_sha256": j.artifact_sha256, "owner": j.owner,
            "tuning_s": j.tuning_s, "created_unix_ms": j.created_unix_ms,
            "end_to_end": _end_to_end_dict(j.end_to_end)}


def _shown_name(name):
    """The file's name as the tracker takes names: printable UTF-8 of at
    most 256 bytes (control characters as '?', "..." ending a cut)."""
    name = "".join(c if c.isprintable() else "?" for c in name)
    data = name.encode("utf-8", "replace")
    if len(data) <= 256:
        return name
    return data[:253].decode("utf-8", "ignore") + "..."


def _all_loopback(address):
    """Whether every HOST:PORT of "HOST:PORT[,HOST:PORT...]" names this
    machine only (127.0.0.0/8, ::1, localhost)."""
    parts = [a for a in address.split(",") if a]
    for part in parts:
        host = part.rpartition(":")[0]
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not (host == "localhost" or host == "::1" or host.startswith("127.")):
            return False
    return bool(parts)


def _channel_target(address):
    """HOST:PORT as given; "HOST:PORT,HOST:PORT,..." (several trackers of one
    farm) as one "ipv4:" target, names resolved here, along which gRPC's
    pick_first fails over, as the kiln CLI does. The first address only when
    a name has no IPv4 address."""
    parts = [a for a in address.split(",") if a]
    if len(parts) <= 1:
        return address, None
    resolved = []
    for part in parts:
        host, _, port = part.rpartition(":")
        try:
            ip = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        except (socket.gaierror, IndexError):
            return parts[0], None
        resolved.append(f"{ip}:{port}")
    return "ipv4:" + ",".join(resolved), parts[0]


class Client:
    """A connection to a kiln tracker. `address` defaults to $KILN_TRACKER,
    `token` to $KILN_TOKEN; `tls_ca` (a PEM file) makes the channel TLS.
    Several trackers of one farm: "HOST:PORT,HOST:PORT,..." (the first that
    answers serves; the client moves on when it goes away)."""

    def __init__(self, address=None, token=None, tls_ca=None):
        address = address or os.environ.get("KILN_TRACKER")
        if not address:
            raise KilnError("INVALID_ARGUMENT", "no tracker address (pass one or set KILN_TRACKER)")
        token = token if token is not None else os.environ.get("KILN_TOKEN")
        options = [("grpc.max_receive_message_length", 16 << 20)]
        target, authority = _channel_target(address)
        if authority:
            options.append(("grpc.default_authority", authority))
        if tls_ca:
            with open(tls_ca, "rb") as f:
                creds = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(target, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._tls = bool(tls_ca)
        self._stub = tracker_pb2_grpc.TrackerStub(self._channel)
        self._metadata = [("authorization", f"Bearer {token}")] if token else []
        self.address = address

    def close(self):
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def upload(self, model):
        """Uploads an ONNX file (a path) in chunks, never holding it whole in
        memory; returns its SHA-256 (the tracker checks it)."""
        size = os.path.getsize(model)
        digest = hashlib.sha256()
        with open(model, "rb") as f:
            for block in iter(lambda: f.read(CHUNK), b""):
                digest.update(block)
        sha = digest.hexdigest()

        def chunks():
            with open(model, "rb") as f:
                off = 0
                while True:
                    data = f.read(CHUNK)
                    last = off + len(data) >= size
                    yield tracker_pb2.ModelChunk(data=data, offset=off, total_size=size,
                                                 sha256=sha if last else "")
                    off += len(data)
                    if last:
                        return
        r = _call(self._stub.UploadModel, chunks(), metadata=self._metadata)
        return r.sha256

    def tune(self, model, key, trials=64, strategy="", budget=0.0, target="",
             input_shapes=None, priority=0, flush_cache=None, threads=0, end_to_end=True,
             precision=""):
        """Uploads `model` (an ONNX file) and submits a tuning job for the
        agents of `key`: `trials` measurements, `strategy` ("xgb", "ga",
        "random", "grid"; "" for the tracker's default), `budget` seconds of
        tuning at most (0: none), `input_shapes` {name: [dims]} for symbolic
        dimensions, `flush_cache` whether every run of a candidate starts
        with the kernel's weights out of the caches (True: from memory;
        False: hot; None: as `kiln tune` decides, as a model of this file's
        size leaves them on the board: in its last-level cache where they
        fit in 3/4 of it, else from memory), `threads` the threads the model will
        run on (0: the board's cores), `end_to_end` whether the job confirms
        its configs by running the whole model on the board (Job info's
        "end_to_end"), `precision` "bf16" for the model's matrix products in
        bfloat16 summed in float32 ("" or "fp32": float32). Returns the Job."""
        model_bytes = os.path.getsize(model) if flush_cache is None else 0
        sha = self.upload(model)
        req = tracker_pb2.SubmitJobRequest(
            model_name=_shown_name(os.path.basename(model)), model_sha256=sha, device_key=key, trials=trials,
            strategy=strategy, budget_s=budget, priority=priority,
            target=common_pb2.Target(spec=target))
        req.timing.flush_cache = flush_cache is not False
        req.timing.model_bytes = model_bytes
        req.timing.threads = threads
        req.skip_end_to_end = not end_to_end
        req.precision = precision
        for name, dims in (input_shapes or {}).items():
            req.input_shapes.add(name=name, dims=list(dims))
        r = _call(self._stub.SubmitJob, req, metadata=self._metadata)
        return Job(self, r.job_id)

    def job(self, job_id):
        return Job(self, job_id)

    def jobs(self):
        """Every job the caller may see, as dicts (see Job.info)."""
        r = _call(self._stub.ListJobs, tracker_pb2.ListJobsRequest(), metadata=self._metadata)
        return [_job_dict(j) for j in r.jobs]

    def devices(self):
        """The farm's agents, as dicts."""
        r = _call(self._stub.ListAgents, tracker_pb2.ListAgentsRequest(), metadata=self._metadata)
        return [{"id": a.agent_id, "key": a.device_key, "target": a.target.spec,
                 "hardware": a.hardware, "connected": a.connected, "in_flight": a.in_flight,
                 "results": a.results, "last_seen_unix_ms": a.last_seen_unix_ms,
                 "quarantined_until_unix_ms": a.quarantined_until_unix_ms} for a in r.agents]

    def records(self, job=None, workload_key="", target="", limit=0):
        """Tuning records (a job's, or a workload's / target's), as dicts;
        follows the pages up to `limit` (0: all)."""
        out = []
        token = ""
        while True:
            req = tracker_pb2.QueryRecordsRequest(
                workload_key=workload_key, target=target, limit=limit,
                job_id=job.id if isinstance(job, Job) else (job or ""), page_token=token)
            r = _call(self._stub.QueryRecords, req, metadata=self._metadata)
            for rec in r.records:
                out.append({"workload": rec.workload.key, "target": rec.target,
                            "config": dict(rec.config.knobs), "mean_cost_s": rec.mean_cost_s,
                            "error": common_pb2.MeasureErrorKind.Name(rec.result.error_kind),
                            "compiler_version": rec.compiler_version, "unix_ms": rec.unix_ms,
                            "farm": rec.farm})
            token = r.next_page_token
            if not token or (limit and len(out) >= limit):
                return out[:limit] if limit else out
