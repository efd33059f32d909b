"""A CreateCertificate client that behaves on the wire as released ztunnel does
(src/identity/caclient.rs, tls/csr.rs): a fresh P-256 key per request, a CSR with an empty
subject and one critical URI SAN, `authorization: Bearer <token>` and `clusterid` call metadata,
`ImpersonatedIdentity` in a google.protobuf.Struct, validity_duration = SECRET_TTL. It dials
localhost:<port> over TLS and verifies the server against the mesh root for the host name
"localhost" (no target-name override: what ztunnel with CA_ADDRESS=https://localhost:15012 checks),
or, with "server_name" in the spec, for that name (ztunnel's ALT_CA_HOSTNAME: the name it verifies
the CA's certificate for instead of the address's host).
Independent of certbroker: Debian's python3-grpcio and python3-cryptography, stubs generated from
proto/istio/v1/auth/ca.proto at test time.

usage: ztunnel_ca_client.py STUB_DIR SPEC_FILE
SPEC: {"target": "localhost:PORT", "roots_file": ..., "server_name"?: ALT_CA_HOSTNAME, "requests": [{"token_file", "san",
       "impersonate"?, "ttl", "clusterid"?, "bad_csr"?: "garbage" | "signature"}]}
Prints a JSON list, one entry per request: {"cert_chain": [...], "spki_pem": ...} or
{"code": "...", "details": "..."}.
"""
import base64
import json
import sys

sys.path.insert(0, sys.argv[1])

import grpc  # noqa: E402
from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from google.protobuf import struct_pb2  # noqa: E402
from istio.v1.auth import ca_pb2, ca_pb2_grpc  # noqa: E402


def csr_for(san: str, bad: str) -> tuple[str, str]:
    """bad: '' (a good CSR), 'garbage' (not a PKCS#10 structure), 'signature' (well formed, the
    signature does not verify: its last byte flipped)."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = x509.CertificateSigningRequestBuilder().subject_name(x509.Name([]))
    builder = builder.add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(san)]), critical=True)
    der = builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.DER)
    if bad == "garbage":
        der = der[: len(der) // 2]
    elif bad == "signature":
        # The signature is the last element; flipping its last byte keeps the DER well formed.
        der = der[:-1] + bytes([der[-1] ^ 0x01])
    body = base64.encodebytes(der).decode().replace("\n", "")
    pem = "-----BEGIN CERTIFICATE REQUEST-----\n" + "\n".join(body[i : i + 64] for i in range(0, len(body), 64)) + "\n-----END CERTIFICATE REQUEST-----\n"
    spki = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return pem, spki


def main() -> int:
    with open(sys.argv[2]) as f:
        spec = json.load(f)
    with open(spec["roots_file"], "rb") as f:
        roots = f.read()
    creds = grpc.ssl_channel_credentials(root_certificates=roots)
    out = []
    options = [("grpc.ssl_target_name_override", spec["server_name"])] if spec.get("server_name") else []
    with grpc.secure_channel(spec["target"], creds, options=options) as channel:
        stub = ca_pb2_grpc.IstioCertificateServiceStub(channel)
        for r in spec["requests"]:
            with open(r["token_file"]) as f:
                token = f.read().strip()
            csr, spki = csr_for(r["san"], r.get("bad_csr", ""))
            meta = struct_pb2.Struct()
            if r.get("impersonate"):
                meta.update({"ImpersonatedIdentity": r["impersonate"]})
            req = ca_pb2.IstioCertificateRequest(csr=csr, validity_duration=r["ttl"], metadata=meta)
            md = [("authorization", "Bearer " + token), ("clusterid", r.get("clusterid", "Kubernetes"))]
            try:
                resp = stub.CreateCertificate(req, metadata=md, timeout=20)
            except grpc.RpcError as err:
                out.append({"code": err.code().name, "details": err.details()})
                continue
            out.append({"cert_chain": list(resp.cert_chain), "spki_pem": spki})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
