"""An independent SPIFFE Broker API client (Python grpcio; stubs generated from our .proto files at
test time, google.rpc.Status/ErrorInfo included). Subscribes once over the Unix socket with mTLS
(Python's ssl module, relayed to grpcio; see tls_relay) and prints one JSON object: {"spiffe_id": ...} for a first message, or
{"code": ..., "details": ..., "status": {"code", "message", "error_info": [...]}} for a refusal,
with the grpc-status-details-bin trailer decoded by the generated google.rpc classes.

usage: broker_api_client.py STUB_DIR SOCKET ROOTS CERT KEY SERVER_ID RPC UID NAMESPACE NAME HEADER [KIND PACKAGE PID]
  RPC: svid | bundles; UID/NAMESPACE/NAME: '' when not set; HEADER: 1 | 0
  KIND: k8s (default) | pid; PACKAGE: broker (default: spiffe.broker, the final spec) | reference
  (spiffe.reference, go-spiffe's and ztunnel#1936's); the reference is packed with the generated
  class of that package, so its type URL is the package's own. PID: the process for KIND pid.
"""
import json
import os
import select
import socket
import ssl
import sys
import threading

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from google.rpc import error_details_pb2, status_pb2  # noqa: E402
from spiffe.broker import broker_pb2, broker_pb2_grpc  # noqa: E402

try:
    from spiffe.reference import reference_pb2  # noqa: E402
except ImportError:  # stubs generated without spiffe/reference/reference.proto
    reference_pb2 = None


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def tls_relay(broker_socket: str, roots: str, cert: str, key: str, server_id: str, listen_path: str) -> None:
    """mTLS to the broker with Python's own ssl module, verified against ROOTS, the server named
    by its SPIFFE ID (a URI SAN: grpcio 1.51 can only match DNS names), relayed to a local
    plaintext socket that grpcio speaks HTTP/2 to."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(roots)
    ctx.load_cert_chain(cert, key)
    ctx.set_alpn_protocols(["h2"])
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(listen_path)
    srv.listen(4)

    def pump(plain: socket.socket, tls: ssl.SSLSocket) -> None:
        try:
            while True:
                ready, _, _ = select.select([plain, tls], [], [], 30)
                if not ready:
                    return
                for s in ready:
                    other = tls if s is plain else plain
                    try:
                        data = s.recv(65536)
                    except ssl.SSLWantReadError:
                        continue
                    if not data:
                        return
                    other.sendall(data)
                    while s is tls and tls.pending():
                        plain.sendall(tls.recv(65536))
        except OSError:
            return
        finally:
            plain.close()
            tls.close()

    def serve() -> None:
        while True:
            plain, _ = srv.accept()
            raw = socket.socket(socket.AF_UNIX)
            raw.connect(broker_socket)
            tls = ctx.wrap_socket(raw)
            sans = [v for k, v in tls.getpeercert().get("subjectAltName", ()) if k == "URI"]
            if sans != [server_id]:
                tls.close()
                plain.close()
                continue
            threading.Thread(target=pump, args=(plain, tls), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def main() -> int:
    _, _, broker_socket, roots, cert, key, server_id, rpc, uid, namespace, name, header, *rest = sys.argv
    kind = rest[0] if len(rest) > 0 else "k8s"
    package = reference_pb2 if len(rest) > 1 and rest[1] == "reference" else broker_pb2
    if kind == "pid":
        ref = package.WorkloadPIDReference(pid=int(rest[2]))
    else:
        ref = package.KubernetesObjectReference(type=package.KubernetesObjectType(plural="pods", group="core"), uid=uid)
        if name:
            ref.key.namespace = namespace
            ref.key.name = name
    workload = broker_pb2.WorkloadReference()
    workload.reference.Pack(ref)
    relay = os.path.join(sys.argv[1], "relay-%d.sock" % os.getpid())
    tls_relay(broker_socket, roots, cert, key, server_id, relay)
    metadata = [("broker.spiffe.io", "true")] if header == "1" else []
    with grpc.insecure_channel("unix:" + relay) as channel:
        stub = broker_pb2_grpc.APIStub(channel)
        if rpc == "svid":
            stream = stub.SubscribeToX509SVID(broker_pb2.SubscribeToX509SVIDRequest(reference=workload), metadata=metadata, timeout=20)
        else:
            stream = stub.SubscribeToX509Bundles(broker_pb2.SubscribeToX509BundlesRequest(reference=workload), metadata=metadata, timeout=20)
        try:
            first = next(stream)
        except grpc.RpcError as err:
            out = {"code": err.code().name, "details": err.details()}
            for k, v in err.trailing_metadata() or ():
                if k == "grpc-status-details-bin":
                    st = status_pb2.Status.FromString(v)
                    infos = []
                    for d in st.details:
                        if d.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
                            info = error_details_pb2.ErrorInfo()
                            d.Unpack(info)
                            infos.append({"reason": info.reason, "domain": info.domain, "metadata": dict(info.metadata)})
                    out["status"] = {"code": st.code, "message": st.message, "error_info": infos}
            print(json.dumps(out))
            os.unlink(relay)
            return 0
        stream.cancel()
        os.unlink(relay)
        if rpc == "svid":
            print(json.dumps({"spiffe_id": first.svids[0].spiffe_id}))
        else:
            print(json.dumps({"bundles": sorted(first.bundles.keys())}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
