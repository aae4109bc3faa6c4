"""Builds the gRPC stubs of ../proto into kiln/v1 with grpcio-tools when the
package is built (`pip install ./python`); they are never checked in."""
import os
import pathlib

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).resolve().parent
PROTO = HERE.parent / "proto"


class BuildWithStubs(build_py):
    def run(self):
        from grpc_tools import protoc
        import grpc_tools

        out = pathlib.Path(self.build_lib)
        (out / "kiln" / "v1").mkdir(parents=True, exist_ok=True)
        include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
        files = sorted(str(p) for p in (PROTO / "kiln" / "v1").glob("*.proto"))
        if not files:
            raise RuntimeError(f"no .proto files under {PROTO}: build from the kiln repository")
        rc = protoc.main(["grpc_tools.protoc", f"-I{PROTO}", f"-I{include}",
                          f"--python_out={out}", f"--grpc_python_out={out}", *files])
        if rc != 0:
            raise RuntimeError(f"protoc failed ({rc}) on {files}")
        (out / "kiln" / "v1" / "__init__.py").write_text("")
        super().run()


setup(cmdclass={"build_py": BuildWithStubs})
