"""The Python package against a real kiln-tracker and kiln-agent on loopback
(KILN_BIN_DIR: the build folder; KILN_RUNTIME: its libkiln_runtime.so)."""
import gc
import os
import socket
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import kiln

BIN = os.environ.get("KILN_BIN_DIR", "")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "small_cnn.onnx")
KEY = "py-cpu"

pytestmark = pytest.mark.skipif(not BIN, reason="set KILN_BIN_DIR to kiln's build folder")


@pytest.fixture(scope="module")
def farm(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("farm")
    port_file = tmp / "port"
    procs = []
    log = open(tmp / "tracker.log", "w")
    procs.append(subprocess.Popen(
        [f"{BIN}/tracker/kiln-tracker", "--listen", "127.0.0.1:0", "--port-file", str(port_file),
         "--db", str(tmp / "kiln.db"), "--artifacts", str(tmp / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT))
    deadline = time.time() + 30
    while not (port_file.exists() and port_file.read_text().strip()):
        assert time.time() < deadline, (tmp / "tracker.log").read_text()
        time.sleep(0.05)
    addr = "127.0.0.1:" + port_file.read_text().strip()
    agent_log = open(tmp / "agent.log", "w")
    procs.append(subprocess.Popen([f"{BIN}/device_agent/kiln-agent", "--tracker", addr, "--key",
                                   KEY, "--id", "py-0"], stdout=agent_log,
                                  stderr=subprocess.STDOUT))
    client = kiln.Client(addr)
    deadline = time.time() + 30
    while not any(d["key"] == KEY and d["connected"] for d in client.devices()):
        assert time.time() < deadline, (tmp / "agent.log").read_text()
        time.sleep(0.1)
    yield addr, client, tmp
    client.close()
    for p in procs:
        p.terminate()
    for p in procs:
        p.wait(timeout=10)
    log.close()
    agent_log.close()


def test_tune_wait_fetch_run_matches_onnxruntime(farm, capsys):
    addr, client, tmp = farm
    job = client.tune(MODEL, key=KEY, trials=12)
    assert job.id.startswith("job-")
    info = job.wait(progress=True)
    assert info["state"] == "completed"
    assert info["trials_done"] == 12
    assert info["best_latency_ms"] > 0
    assert len(info["tasks"]) == 6
    err = capsys.readouterr().err
    assert job.id in err and "trial" in err  # the progress bar was drawn
    art = job.fetch(str(tmp / "cnn.kiln"))
    module = kiln.Module(art)
    assert [n for n, _, _ in module.inputs] == ["data"]
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    got = module.run({"data": x})
    ref = ort.InferenceSession(MODEL, providers=["CPUExecutionProvider"]).run(None, {"data": x})
    out_name = onnx.load(MODEL).graph.output[0].name
    np.testing.assert_allclose(got[out_name], ref[0], rtol=1e-4, atol=1e-4)
    # A runner outlives the Module object it came from, and runs into the
    # same output arrays each time.
    run, outs = kiln.Module(art).runner({"data": x})
    gc.collect()
    for _ in range(2):
        outs[out_name].fill(0)
        run()
        np.testing.assert_allclose(outs[out_name], ref[0], rtol=1e-4, atol=1e-4)
    # The farm as the client sees it.
    assert job.id in [j["id"] for j in client.jobs()]
    assert [d["id"] for d in client.devices()] == ["py-0"]
    records = client.records(job)
    assert len(records) == 12
    assert all(r["target"].startswith("llvm") for r in records)
    assert any(r["mean_cost_s"] > 0 and r["error"] == "MEASURE_ERROR_KIND_NONE"
               for r in records)


def test_tune_in_bf16_runs_close_to_float32(farm, tmp_path):
    """precision="bf16": the fetched module's products are bfloat16's
    (close to float32, not equal); a precision not built is refused."""
    addr, client, tmp = farm
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    w = rng.standard_normal((64, 48)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 48])],
        [numpy_helper.from_array(w, "w")])
    path = str(tmp_path / "linear.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    job = client.tune(path, key=KEY, trials=6, precision="bf16")
    info = job.wait(progress=False)
    assert info["state"] == "completed", info
    x = rng.standard_normal((8, 64)).astype(np.float32)
    got = kiln.Module(job.fetch(str(tmp_path / "linear.kiln"))).run({"x": x})["y"]
    want = x @ w
    np.testing.assert_allclose(got, want, rtol=0, atol=0.1)
    assert np.abs(got - want).max() > 1e-5  # rounded to bfloat16, not float32
    with pytest.raises(kiln.KilnError, match="not supported yet"):
        client.tune(path, key=KEY, trials=6, precision="fp16")


def test_module_checks_inputs(farm):
    addr, client, tmp = farm
    job = client.tune(MODEL, key=KEY, trials=6)
    job.wait(progress=False)
    module = kiln.Module(job.fetch(str(tmp / "again.kiln")))
    x = np.zeros((1, 3, 32, 32), np.float32)
    with pytest.raises(ValueError, match="input 'data' .* is missing"):
        module.run({})
    with pytest.raises(ValueError, match=r"unknown input\(s\) \['image'\]"):
        module.run({"data": x, "image": x})
    with pytest.raises(ValueError, match=r"expected shape \[1, 3, 32, 32\], given \[1, 3, 16, 16\]"):
        module.run({"data": np.zeros((1, 3, 16, 16), np.float32)})
    with pytest.raises(ValueError, match="expected float32, given int64"):
        module.run({"data": np.zeros((1, 3, 32, 32), np.int64)})
    module.run({"data": x.astype(np.float64)})  # converted, as kiln-run does
    with pytest.raises(kiln.KilnError) as e:
        kiln.Module(str(tmp / "no-such.kiln"))
    assert e.value.code == "NOT_FOUND"
    bad = tmp / "bad.kiln"
    bad.write_bytes(b"not an artifact")
    with pytest.raises(kiln.KilnError, match="magic"):
        kiln.Module(str(bad))


def test_module_verifies_the_trackers_signature(farm):
    addr, client, tmp = farm
    job = client.tune(MODEL, key=KEY, trials=4)
    job.wait(progress=False)
    art = job.fetch(str(tmp / "signed.kiln"))
    keys = subprocess.run([f"{BIN}/tracker/kiln-tracker", "keys", "--db", str(tmp / "kiln.db")],
                          capture_output=True, text=True)
    assert keys.returncode == 0, keys.stderr
    pub = tmp / "tracker.pub"
    pub.write_text(keys.stdout)
    x = np.zeros((1, 3, 32, 32), np.float32)
    want = kiln.Module(art).run({"data": x})
    for trust in (str(pub), keys.stdout, keys.stdout.encode()):  # a path, or the PEM itself
        got = kiln.Module(art, trust_key=trust).run({"data": x})
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])
    other = subprocess.run([f"{BIN}/tracker/kiln-tracker", "keys", "--signing-key",
                            str(tmp / "other-key.pem")], capture_output=True, text=True)
    assert other.returncode == 0, other.stderr
    with pytest.raises(kiln.KilnError, match="not by the trusted key") as e:
        kiln.Module(art, trust_key=other.stdout)
    assert e.value.code == "UNAUTHENTICATED"
    # One weight byte changed: refused whether or not a key is given.
    data = bytearray(open(art, "rb").read())
    data[-100] ^= 1
    altered = tmp / "altered.kiln"
    altered.write_bytes(bytes(data))
    for trust in (None, keys.stdout):
        with pytest.raises(kiln.KilnError, match="section 'weights'") as e:
            kiln.Module(str(altered), trust_key=trust)
        assert e.value.code == "DATA_LOSS"


def test_errors_carry_the_grpc_status(farm):
    addr, client, tmp = farm
    with pytest.raises(kiln.KilnError) as e:
        client.job("job-000000000000").info()
    assert e.value.code == "NOT_FOUND"
    with pytest.raises(kiln.KilnError) as e:
        client.tune(MODEL, key="nobody-serves-this", trials=4)
    assert e.value.code == "FAILED_PRECONDITION"
    assert "no agent with key" in e.value.message
    bad = tmp / "bad.onnx"
    bad.write_bytes(b"this is not onnx")
    with pytest.raises(kiln.KilnError) as e:
        client.tune(str(bad), key=KEY, trials=4)
    assert e.value.code == "INVALID_ARGUMENT"
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with pytest.raises(kiln.KilnError) as e:
        kiln.Client(dead).jobs()
    assert e.value.code == "UNAVAILABLE"
    os.environ.pop("KILN_TRACKER", None)
    with pytest.raises(kiln.KilnError, match="KILN_TRACKER"):
        kiln.Client()


def test_cancel_and_a_failed_wait(farm):
    addr, client, tmp = farm
    job = client.tune(MODEL, key=KEY, trials=100000)
    cancelled = job.cancel()
    assert cancelled["state"] in ("cancelled", "tuning", "queued")
    with pytest.raises(kiln.JobFailed) as e:
        job.wait(progress=False, timeout=120)
    assert e.value.job["state"] == "cancelled"


def test_a_model_of_several_chunks_uploads_whole(farm):
    addr, client, tmp = farm
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(
        np.random.default_rng(2).standard_normal((1024, 1024)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "big",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1024])],
                          initializer=[w])
    path = tmp / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    assert path.stat().st_size > 4 * kiln.client.CHUNK
    import hashlib
    assert client.upload(str(path)) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_several_trackers_fail_over_past_a_dead_one(farm):
    addr, client, tmp = farm
    with socket.socket() as s:  # a port nobody listens on, listed first
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    with kiln.Client(f"{dead},{addr}") as c:
        assert isinstance(c.jobs(), list)


def test_environment_names_the_tracker(farm, monkeypatch):
    addr, client, tmp = farm
    monkeypatch.setenv("KILN_TRACKER", addr)
    with kiln.Client() as c:
        assert c.address == addr
        assert isinstance(c.jobs(), list)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-v"]))


def test_tune_sets_the_caches_as_the_model_leaves_them(tmp_path):
    """By default a job's candidates are timed with the caches as a model of
    the file's size leaves them (flush_cache with model_bytes, which the
    agent weighs against its caches); flush_cache=True flushes to memory,
    False times hot (the requests as sent, through a stand-in for the
    tracker's stub)."""
    from kiln.v1 import tracker_pb2
    sent = []

    class Stub:
        def UploadModel(self, chunks, metadata=None):
            for _ in chunks:
                pass
            return tracker_pb2.UploadModelResponse(sha256="0" * 64)

        def SubmitJob(self, request, metadata=None):
            sent.append(request)
            return tracker_pb2.SubmitJobResponse(job_id="job-000000000001")

    client = kiln.Client("127.0.0.1:1")
    client._stub = Stub()
    small, big = tmp_path / "small.onnx", tmp_path / "big.onnx"
    small.write_bytes(b"\0" * 1000)
    big.write_bytes(b"\0" * (17 << 20))
    client.tune(str(small), key=KEY)
    assert sent[-1].timing.flush_cache and sent[-1].timing.model_bytes == 1000
    client.tune(str(big), key=KEY)
    assert sent[-1].timing.flush_cache and sent[-1].timing.model_bytes == 17 << 20
    client.tune(str(big), key=KEY, flush_cache=False)
    assert not sent[-1].timing.flush_cache and sent[-1].timing.model_bytes == 0
    client.tune(str(small), key=KEY, flush_cache=True)
    assert sent[-1].timing.flush_cache and sent[-1].timing.model_bytes == 0
    client.close()


def test_fetch_over_plaintext_from_another_machine_is_refused(tmp_path):
    # Nothing is dialled: the refusal comes first (an artifact is native code).
    for address in ("farm.example:7070", "127.0.0.1:7070,farm.example:7070"):
        client = kiln.Client(address, token="kiln_x")
        with pytest.raises(kiln.KilnError) as e:
            client.job("job-1").fetch(str(tmp_path / "m.kiln"))
        assert e.value.code == "FAILED_PRECONDITION"
        assert "refusing to fetch native code" in str(e.value)
        assert not (tmp_path / "m.kiln.part").exists()
        client.close()
