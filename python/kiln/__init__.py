"""kiln from Python: tune models on a kiln farm and run the artifacts.

    import kiln
    client = kiln.Client("tracker:7070", token="kiln_...")   # or KILN_TRACKER / KILN_TOKEN
    job = client.tune("model.onnx", key="x86", trials=200)
    job.wait(progress=True)
    job.fetch("model.kiln")
    outputs = kiln.Module("model.kiln").run({"input": x})
"""
from kiln.errors import KilnError, JobFailed
from kiln.runtime import Module

__all__ = ["Client", "Job", "Module", "KilnError", "JobFailed"]
__version__ = "0.7.0"


def __getattr__(name):
    # The client needs the generated gRPC stubs and grpcio; the runtime does
    # not, so a deploying machine can use kiln.Module alone.
    if name in ("Client", "Job"):
        from kiln import client
        return getattr(client, name)
    raise AttributeError(name)
