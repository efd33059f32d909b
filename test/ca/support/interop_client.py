"""An independent IstioCertificateService client (Python grpcio, stubs generated from our
.proto at test time). Prints one JSON object: {"cert_chain": [...]} or {"code": "...", "details": "..."}.

usage: interop_client.py STUB_DIR TARGET ROOTS_FILE CSR_FILE TOKEN_FILE [IMPERSONATE] [TTL]
"""
import json
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from google.protobuf import struct_pb2  # noqa: E402
from istio.v1.auth import ca_pb2, ca_pb2_grpc  # noqa: E402


def main() -> int:
    _, _, target, roots_file, csr_file, token_file, *rest = sys.argv
    impersonate = rest[0] if len(rest) > 0 and rest[0] else None
    ttl = int(rest[1]) if len(rest) > 1 else 0
    with open(roots_file, "rb") as f:
        roots = f.read()
    with open(csr_file) as f:
        csr = f.read()
    with open(token_file) as f:
        token = f.read().strip()
    creds = grpc.ssl_channel_credentials(root_certificates=roots)
    options = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(target, creds, options=options) as channel:
        stub = ca_pb2_grpc.IstioCertificateServiceStub(channel)
        meta = struct_pb2.Struct()
        if impersonate:
            meta.update({"ImpersonatedIdentity": impersonate})
        req = ca_pb2.IstioCertificateRequest(csr=csr, validity_duration=ttl, metadata=meta)
        md = [("authorization", "Bearer " + token)] if token else []
        try:
            resp = stub.CreateCertificate(req, metadata=md, timeout=20)
        except grpc.RpcError as err:
            print(json.dumps({"code": err.code().name, "details": err.details()}))
            return 0
        print(json.dumps({"cert_chain": list(resp.cert_chain)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
