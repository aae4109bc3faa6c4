"""kiln's exceptions."""


class KilnError(Exception):
    """A call that failed: `code` is the gRPC status code's name
    ("NOT_FOUND", "UNAUTHENTICATED", ...) and `message` the tracker's
    message (or the runtime's)."""

    def __init__(self, code, message):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class JobFailed(KilnError):
    """A job that ended failed or cancelled; `job` is its last state."""

    def __init__(self, job, code, message):
        super().__init__(code, message)
        self.job = job
