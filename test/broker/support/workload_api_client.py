"""An independent SPIFFE Workload API client (Python grpcio), behaving as go-spiffe does on the
wire: plain gRPC over the Unix socket named like SPIFFE_ENDPOINT_SOCKET (unix:///path), the
`workload.spiffe.io: true` metadata on every call, the upstream message names and field numbers
(stubs generated at test time from proto/spiffe/workload/workload.proto).

It waits for one line on stdin before it connects (the test first moves this process into a
pod's cgroup), then prints one JSON line per message, up to COUNT messages, and exits; a
refusal prints {"code": "<grpc status name>", "details": "..."}.

usage: workload_api_client.py STUB_DIR ENDPOINT RPC HEADER COUNT
  RPC: x509svid | x509bundles | jwtsvid | jwtbundles | validatejwt; HEADER: 1 | 0
"""
import base64
import json
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from spiffe.workload import workload_pb2, workload_pb2_grpc  # noqa: E402

ENDPOINT, RPC, HEADER, COUNT = sys.argv[2], sys.argv[3], sys.argv[4] == "1", int(sys.argv[5])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def emit(obj) -> None:
    print(json.dumps(obj), flush=True)


def svid_message(msg) -> dict:
    return {
        "svids": [
            {"spiffe_id": s.spiffe_id, "x509_svid": b64(s.x509_svid), "x509_svid_key": b64(s.x509_svid_key), "bundle": b64(s.bundle), "hint": s.hint}
            for s in msg.svids
        ],
        "crl": len(msg.crl),
        "federated_bundles": {k: b64(v) for k, v in msg.federated_bundles.items()},
    }


def main() -> None:
    sys.stdin.readline()
    if not ENDPOINT.startswith("unix:///"):
        raise SystemExit("endpoint must be unix:///path")
    metadata = [("workload.spiffe.io", "true")] if HEADER else []
    with grpc.insecure_channel(ENDPOINT) as channel:
        stub = workload_pb2_grpc.SpiffeWorkloadAPIStub(channel)
        try:
            if RPC == "x509svid":
                for i, msg in enumerate(stub.FetchX509SVID(workload_pb2.X509SVIDRequest(), metadata=metadata)):
                    emit(svid_message(msg))
                    if i + 1 >= COUNT:
                        return
            elif RPC == "x509bundles":
                for i, msg in enumerate(stub.FetchX509Bundles(workload_pb2.X509BundlesRequest(), metadata=metadata)):
                    emit({"bundles": {k: b64(v) for k, v in msg.bundles.items()}, "crl": len(msg.crl)})
                    if i + 1 >= COUNT:
                        return
            elif RPC == "jwtsvid":
                stub.FetchJWTSVID(workload_pb2.JWTSVIDRequest(audience=["a"]), metadata=metadata)
                emit({"served": True})
            elif RPC == "jwtbundles":
                for _ in stub.FetchJWTBundles(workload_pb2.JWTBundlesRequest(), metadata=metadata):
                    emit({"served": True})
                    return
            elif RPC == "validatejwt":
                stub.ValidateJWTSVID(workload_pb2.ValidateJWTSVIDRequest(audience="a", svid="x.y.z"), metadata=metadata)
                emit({"served": True})
            else:
                raise SystemExit(f"unknown rpc {RPC}")
            emit({"ended": True})
        except grpc.RpcError as err:
            emit({"code": err.code().name, "details": err.details()})


main()
