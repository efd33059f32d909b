//! certbroker's Rust interop client (test/interop/rust-h2.e2e.test.ts): gRPC calls made the way
//! tonic makes them for ztunnel, on hyper's HTTP/2 client connection (`hyper::client::conn`,
//! HTTP/2 only) over tokio-rustls with ALPN h2. The few protobuf fields are encoded by hand.
//!
//! Subcommands (each prints one JSON line on stdout; a setup failure goes to stderr, exit 1):
//!   ca-create  IstioCertificateService/CreateCertificate with `authorization: Bearer <token>`
//!   health     grpc.health.v1.Health/Check
//! Every call of a run shares one connection: `--streams N` opens N concurrent streams on it.
//! Flags: --target host:port --roots PEM --server-name NAME [--cert PEM --key PEM]
//!   [--streams N] [--warmup (one call before the N)] [--chunk BYTES] [--body-once] [--hold] [--late-call] [--grpc-timeout V]
//!   [--meta key=value]... [--sensitive] [--adaptive-window] [--stream-window N] [--conn-window N]
//!   [--max-frame-size N] [--keepalive-ms N] [--timeout-ms N]
//!   [--cancel-mid K (the first K of the N: half the message, then the body fails with CANCEL)]
//!   [--cancel-after K (the next K: the whole request, then the call dropped before its answer)]
//! ca-create: --token-file F --csr-file F [--ttl S] [--impersonate ID] [--cluster-id C]
//!   [--pad BYTES (a Struct entry of that many bytes: a message past the 64 KiB windows)]
//!   [--raw-request HEX]
//! health: [--service NAME]

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::io::BufRead;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Bytes, HttpBody};
use hyper::client::conn::{Builder, ResponseFuture, SendRequest};
use hyper::{Body, HeaderMap, Request};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio_rustls::TlsConnector;

type Res<T> = Result<T, String>;

// ---- flags ---------------------------------------------------------------------------------

const SWITCHES: &[&str] = &["adaptive-window", "hold", "late-call", "body-once", "warmup", "sensitive"];

struct Args(HashMap<String, Vec<String>>);

impl Args {
    fn parse(argv: &[String]) -> Res<Args> {
        let mut m: HashMap<String, Vec<String>> = HashMap::new();
        let mut it = argv.iter();
        while let Some(a) = it.next() {
            let name = a.strip_prefix("--").ok_or_else(|| format!("unexpected argument {}", a))?;
            let value = if SWITCHES.contains(&name) {
                String::new()
            } else {
                it.next().ok_or_else(|| format!("--{} needs a value", name))?.clone()
            };
            m.entry(name.to_string()).or_default().push(value);
        }
        Ok(Args(m))
    }
    fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).and_then(|v| v.last()).map(|s| s.as_str())
    }
    fn all(&self, k: &str) -> Vec<&str> {
        self.0.get(k).map(|v| v.iter().map(|s| s.as_str()).collect()).unwrap_or_default()
    }
    fn has(&self, k: &str) -> bool {
        self.0.contains_key(k)
    }
    fn num<T: FromStr>(&self, k: &str, default: T) -> Res<T> {
        match self.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{}: not a number: {}", k, v)),
        }
    }
    fn required(&self, k: &str) -> Res<&str> {
        self.get(k).ok_or_else(|| format!("--{} is required", k))
    }
}

fn read_file(path: &str) -> Res<Vec<u8>> {
    std::fs::read(path).map_err(|e| format!("{}: {}", path, e))
}

// ---- protobuf and gRPC framing -----------------------------------------------------------

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn put_bytes(b: &mut Vec<u8>, field: u64, v: &[u8]) {
    put_varint(b, field << 3 | 2);
    put_varint(b, v.len() as u64);
    b.extend_from_slice(v);
}

enum Value {
    Varint(u64),
    Bytes(Vec<u8>),
    Fixed,
}

fn get_varint(b: &[u8], at: &mut usize) -> Res<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or("truncated varint")?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err("varint too long".into())
}

fn fields(b: &[u8]) -> Res<Vec<(u64, Value)>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        let tag = get_varint(b, &mut at)?;
        let value = match tag & 7 {
            0 => Value::Varint(get_varint(b, &mut at)?),
            2 => {
                let n = get_varint(b, &mut at)? as usize;
                let v = b.get(at..at + n).ok_or("truncated field")?.to_vec();
                at += n;
                Value::Bytes(v)
            }
            1 => {
                at += 8;
                Value::Fixed
            }
            5 => {
                at += 4;
                Value::Fixed
            }
            t => return Err(format!("wire type {}", t)),
        };
        out.push((tag >> 3, value));
    }
    if at > b.len() {
        return Err("truncated field".into());
    }
    Ok(out)
}

/// One length-prefixed gRPC message (uncompressed).
fn grpc_frame(msg: &[u8]) -> Bytes {
    let mut b = Vec::with_capacity(5 + msg.len());
    b.push(0);
    b.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    b.extend_from_slice(msg);
    Bytes::from(b)
}

fn grpc_messages(mut b: &[u8]) -> Res<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        if b.len() < 5 {
            return Err("truncated gRPC message prefix".into());
        }
        if b[0] != 0 {
            return Err("compressed gRPC message".into());
        }
        let n = u32::from_be_bytes([b[1], b[2], b[3], b[4]]) as usize;
        let msg = b.get(5..5 + n).ok_or("truncated gRPC message")?;
        out.push(msg.to_vec());
        b = &b[5 + n..];
    }
    Ok(out)
}

// ---- JSON output ---------------------------------------------------------------------------

fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

struct Obj(Vec<String>);

impl Obj {
    fn new() -> Obj {
        Obj(Vec::new())
    }
    fn raw(&mut self, k: &str, v: String) -> &mut Obj {
        self.0.push(format!("{}:{}", json_str(k), v));
        self
    }
    fn str(&mut self, k: &str, v: &str) -> &mut Obj {
        self.raw(k, json_str(v))
    }
    fn render(&self) -> String {
        format!("{{{}}}", self.0.join(","))
    }
}

fn json_list(items: impl Iterator<Item = String>) -> String {
    format!("[{}]", items.collect::<Vec<_>>().join(","))
}

// ---- connection ----------------------------------------------------------------------------

fn tls_config(a: &Args) -> Res<rustls::ClientConfig> {
    let path = a.required("roots")?;
    let mut roots = rustls::RootCertStore::empty();
    let ders = rustls_pemfile::certs(&mut &read_file(path)?[..]).map_err(|e| format!("{}: {}", path, e))?;
    if ders.is_empty() {
        return Err(format!("no certificate in {}", path));
    }
    for der in ders {
        roots.add(&rustls::Certificate(der)).map_err(|e| format!("root in {}: {:?}", path, e))?;
    }
    let builder = rustls::ClientConfig::builder().with_safe_defaults().with_root_certificates(roots);
    let mut cfg = match (a.get("cert"), a.get("key")) {
        (Some(cert), Some(key)) => {
            let chain = rustls_pemfile::certs(&mut &read_file(cert)?[..]).map_err(|e| format!("{}: {}", cert, e))?;
            let chain = chain.into_iter().map(rustls::Certificate).collect();
            builder.with_single_cert(chain, read_key(key)?).map_err(|e| format!("client certificate: {}", e))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("--cert and --key go together".into()),
    };
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    Ok(cfg)
}

fn read_key(path: &str) -> Res<rustls::PrivateKey> {
    let pem = read_file(path)?;
    let mut r = &pem[..];
    loop {
        match rustls_pemfile::read_one(&mut r).map_err(|e| format!("{}: {}", path, e))? {
            Some(rustls_pemfile::Item::PKCS8Key(k)) | Some(rustls_pemfile::Item::ECKey(k)) | Some(rustls_pemfile::Item::RSAKey(k)) => return Ok(rustls::PrivateKey(k)),
            Some(_) => continue,
            None => return Err(format!("no private key in {}", path)),
        }
    }
}

struct Conn {
    tx: SendRequest<CallBody>,
    task: JoinHandle<Res<()>>,
    alpn: String,
    authority: String,
}

/// TCP (nodelay, as hyper's connector sets it), TLS with ALPN h2, then hyper's HTTP/2 handshake
/// with the window and keep-alive options tonic's Endpoint exposes.
async fn connect(a: &Args) -> Res<Conn> {
    let target = a.required("target")?;
    let tcp = TcpStream::connect(target).await.map_err(|e| format!("connect {}: {}", target, e))?;
    tcp.set_nodelay(true).map_err(|e| e.to_string())?;
    let name = rustls::ServerName::try_from(a.required("server-name")?).map_err(|e| format!("--server-name: {}", e))?;
    let tls = TlsConnector::from(Arc::new(tls_config(a)?)).connect(name, tcp).await.map_err(|e| format!("TLS handshake: {}", e))?;
    let alpn = tls.get_ref().1.alpn_protocol().map(|p| String::from_utf8_lossy(p).into_owned()).unwrap_or_default();
    let mut b = Builder::new();
    b.http2_only(true);
    if a.has("adaptive-window") {
        b.http2_adaptive_window(true);
    }
    if a.has("stream-window") {
        b.http2_initial_stream_window_size(a.num::<u32>("stream-window", 0)?);
    }
    if a.has("conn-window") {
        b.http2_initial_connection_window_size(a.num::<u32>("conn-window", 0)?);
    }
    if a.has("max-frame-size") {
        b.http2_max_frame_size(a.num::<u32>("max-frame-size", 0)?);
    }
    if a.has("keepalive-ms") {
        b.http2_keep_alive_interval(Duration::from_millis(a.num("keepalive-ms", 0)?));
        b.http2_keep_alive_timeout(Duration::from_secs(10));
        b.http2_keep_alive_while_idle(true);
    }
    let (tx, conn) = b.handshake::<_, CallBody>(tls).await.map_err(|e| format!("HTTP/2 handshake: {}", e))?;
    let task = tokio::spawn(async move { conn.await.map_err(|e| e.to_string()) });
    let authority = match target.rsplit_once(':') {
        Some((_, port)) => format!("{}:{}", a.required("server-name")?, port),
        None => target.to_string(),
    };
    Ok(Conn { tx, task, alpn, authority })
}

// ---- calls ---------------------------------------------------------------------------------

struct CallSpec {
    path: String,
    metadata: Vec<(String, String)>,
    message: Vec<u8>,
    chunk: usize,
    body_once: bool,
    sensitive: bool,
}

#[derive(Default)]
struct Outcome {
    error: Option<String>,
    /// How the call was cancelled (`mid`, `after`), empty if it was not.
    cancelled: &'static str,
    http_status: u16,
    content_type: String,
    grpc_status: Option<u32>,
    grpc_message: String,
    error_code: String,
    trailers_only: bool,
    messages: Vec<Vec<u8>>,
}

fn header(h: &HeaderMap, name: &str) -> String {
    h.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()).unwrap_or_default()
}

/// grpc-message is percent-encoded (gRPC over HTTP/2).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn read_status(h: &HeaderMap, o: &mut Outcome) {
    if let Some(v) = h.get("grpc-status") {
        o.grpc_status = v.to_str().ok().and_then(|s| s.parse().ok());
        o.grpc_message = percent_decode(&header(h, "grpc-message"));
        o.error_code = header(h, "certbroker-error-code");
    }
}

/// Whether a call is cancelled on the way: not, mid-body, or after the whole request.
#[derive(Clone, Copy, PartialEq)]
enum Cancel {
    No,
    Mid,
    After,
}

/// A request body: hyper's, or (`Cancel::Mid`) one that sends its first part and, a moment
/// later, fails with an h2 CANCEL error: hyper then resets the stream with the reason the body's
/// error carries, RST_STREAM(CANCEL), as for a request stream given up half-sent.
enum CallBody {
    Hyper(Body),
    CancelMid(Option<Bytes>, Pin<Box<tokio::time::Sleep>>),
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl HttpBody for CallBody {
    type Data = Bytes;
    type Error = BoxError;
    fn poll_data(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, BoxError>>> {
        match self.get_mut() {
            CallBody::Hyper(b) => Pin::new(b).poll_data(cx).map_err(Into::into),
            CallBody::CancelMid(first, wait) => {
                if let Some(part) = first.take() {
                    return Poll::Ready(Some(Ok(part)));
                }
                match wait.as_mut().poll(cx) {
                    Poll::Pending => Poll::Pending,
                    Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(h2::Error::from(h2::Reason::CANCEL))))),
                }
            }
        }
    }
    fn poll_trailers(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<Option<HeaderMap>, BoxError>> {
        match self.get_mut() {
            CallBody::Hyper(b) => Pin::new(b).poll_trailers(cx).map_err(Into::into),
            CallBody::CancelMid(..) => Poll::Ready(Ok(None)),
        }
    }
    fn is_end_stream(&self) -> bool {
        matches!(self, CallBody::Hyper(b) if b.is_end_stream())
    }
    fn size_hint(&self) -> hyper::body::SizeHint {
        match self {
            CallBody::Hyper(b) => b.size_hint(),
            CallBody::CancelMid(..) => hyper::body::SizeHint::default(),
        }
    }
}

/// Starts one call on the connection: HEADERS as tonic sends them, then the message as DATA
/// (a streaming body that ends with an empty END_STREAM frame, as tonic's does; `--body-once`:
/// one DATA frame with END_STREAM). With `hold`, the first half goes out and the rest waits.
/// `Cancel::After`: once the body's last part is handed to hyper the call is dropped (hyper's
/// response future, as tonic's call future is dropped): h2 resets the stream with CANCEL.
async fn start_call(conn: &mut Conn, spec: &CallSpec, hold: Option<watch::Receiver<bool>>, cancel: Cancel) -> Res<JoinHandle<Outcome>> {
    let frame = grpc_frame(&spec.message);
    let (sent_tx, sent_rx) = oneshot::channel::<()>();
    let body = if cancel == Cancel::Mid {
        CallBody::CancelMid(Some(frame.slice(..frame.len() / 2)), Box::pin(tokio::time::sleep(Duration::from_millis(50))))
    } else if spec.body_once && hold.is_none() && cancel == Cancel::No {
        CallBody::Hyper(Body::from(frame))
    } else {
        let (mut sender, body) = Body::channel();
        let chunk = spec.chunk.max(1);
        tokio::spawn(async move {
            let mut parts: Vec<Bytes> = (0..frame.len()).step_by(chunk).map(|at| frame.slice(at..(at + chunk).min(frame.len()))).collect();
            if let Some(mut go) = hold {
                let rest = parts.split_off(1);
                let first = parts.pop().unwrap_or_default();
                let (head, tail) = (first.slice(..first.len() / 2), first.slice(first.len() / 2..));
                if sender.send_data(head).await.is_err() {
                    return;
                }
                while !*go.borrow() {
                    if go.changed().await.is_err() {
                        return;
                    }
                }
                parts = std::iter::once(tail).chain(rest).collect();
            }
            for p in parts {
                if sender.send_data(p).await.is_err() {
                    return;
                }
            }
            drop(sender);
            let _ = sent_tx.send(());
        });
        CallBody::Hyper(body)
    };
    let mut req = Request::builder()
        .method("POST")
        .uri(format!("https://{}{}", conn.authority, spec.path))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("user-agent", "tonic/0.8.3");
    for (k, v) in &spec.metadata {
        // `--sensitive`: every metadata value HPACK "never indexed" (h2 encodes sensitive values so).
        let mut value = hyper::header::HeaderValue::from_str(v).map_err(|e| format!("metadata {}: {}", k, e))?;
        value.set_sensitive(spec.sensitive);
        req = req.header(k.as_str(), value);
    }
    let req = req.body(body).map_err(|e| format!("request: {}", e))?;
    Ready(&mut conn.tx).await.map_err(|e| format!("connection not ready: {}", e))?;
    let fut = conn.tx.send_request(req);
    Ok(match cancel {
        Cancel::No => tokio::spawn(finish(fut)),
        Cancel::Mid => tokio::spawn(async move { Outcome { cancelled: "mid", ..finish(fut).await } }),
        Cancel::After => tokio::spawn(async move {
            let _ = sent_rx.await;
            drop(fut);
            Outcome { cancelled: "after", ..Outcome::default() }
        }),
    })
}

/// `SendRequest::poll_ready` as a future (hyper 0.14.19 has no `ready()`; no `std::future::poll_fn` in Rust 1.63).
struct Ready<'a>(&'a mut SendRequest<CallBody>);

impl Future for Ready<'_> {
    type Output = hyper::Result<()>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.poll_ready(cx)
    }
}

async fn finish(fut: ResponseFuture) -> Outcome {
    let mut o = Outcome::default();
    let resp = match fut.await {
        Ok(r) => r,
        Err(e) => {
            o.error = Some(format!("response: {}", e));
            return o;
        }
    };
    o.http_status = resp.status().as_u16();
    let (parts, mut body) = resp.into_parts();
    o.content_type = header(&parts.headers, "content-type");
    if parts.headers.contains_key("grpc-status") {
        // Trailers-only: the status is all, the body is not read (as tonic does). A server that
        // answers before the request is complete then resets the stream with NO_ERROR (RFC 9113
        // §8.1), which h2 0.3 reports as an error on a body read.
        o.trailers_only = true;
        read_status(&parts.headers, &mut o);
        return o;
    }
    let mut buf = Vec::new();
    while let Some(chunk) = body.data().await {
        match chunk {
            Ok(c) => buf.extend_from_slice(&c),
            Err(e) => {
                o.error = Some(format!("body: {}", e));
                return o;
            }
        }
    }
    match body.trailers().await {
        Ok(Some(t)) => read_status(&t, &mut o),
        Ok(None) => {}
        Err(e) => o.error = Some(format!("trailers: {}", e)),
    }
    match grpc_messages(&buf) {
        Ok(m) => o.messages = m,
        Err(e) => o.error = Some(e),
    }
    o
}

/// The call's JSON: transport and gRPC outcome, and the answer as `decode` reads it.
fn outcome_json(o: &Outcome, decode: fn(&[u8], &mut Obj) -> Res<()>) -> String {
    let mut j = Obj::new();
    if let Some(e) = &o.error {
        j.str("error", e);
    }
    if !o.cancelled.is_empty() {
        j.str("cancelled", o.cancelled);
    }
    j.raw("http_status", o.http_status.to_string()).str("content_type", &o.content_type);
    j.raw("grpc_status", o.grpc_status.map(|s| s.to_string()).unwrap_or_else(|| "null".into()));
    j.str("grpc_message", &o.grpc_message).str("error_code", &o.error_code);
    j.raw("trailers_only", o.trailers_only.to_string()).raw("messages", o.messages.len().to_string());
    if let Some(m) = o.messages.first() {
        if let Err(e) = decode(m, &mut j) {
            j.str("decode_error", &e);
        }
    }
    j.render()
}

// ---- subcommands ---------------------------------------------------------------------------

/// IstioCertificateRequest: csr = 1, validity_duration = 3, metadata = 4 (google.protobuf.Struct:
/// fields = 1, map<string, Value>; Value.string_value = 3).
fn istio_certificate_request(a: &Args) -> Res<Vec<u8>> {
    if let Some(hex) = a.get("raw-request") {
        return (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2).unwrap_or("x"), 16).map_err(|_| "--raw-request: not hex".to_string())).collect();
    }
    let mut b = Vec::new();
    put_bytes(&mut b, 1, &read_file(a.required("csr-file")?)?);
    let ttl: u64 = a.num("ttl", 0)?;
    if ttl != 0 {
        put_varint(&mut b, 3 << 3);
        put_varint(&mut b, ttl);
    }
    let mut meta: Vec<(&str, String)> = Vec::new();
    if let Some(id) = a.get("impersonate") {
        meta.push(("ImpersonatedIdentity", id.to_string()));
    }
    let pad: usize = a.num("pad", 0)?;
    if pad > 0 {
        meta.push(("Padding", "p".repeat(pad)));
    }
    if !meta.is_empty() {
        let mut st = Vec::new();
        for (k, v) in meta {
            let mut value = Vec::new();
            put_bytes(&mut value, 3, v.as_bytes());
            let mut entry = Vec::new();
            put_bytes(&mut entry, 1, k.as_bytes());
            put_bytes(&mut entry, 2, &value);
            put_bytes(&mut st, 1, &entry);
        }
        put_bytes(&mut b, 4, &st);
    }
    Ok(b)
}

fn decode_certificate_response(m: &[u8], j: &mut Obj) -> Res<()> {
    let chain: Vec<String> = fields(m)?
        .into_iter()
        .filter_map(|(n, v)| match (n, v) {
            (1, Value::Bytes(b)) => Some(json_str(&String::from_utf8_lossy(&b))),
            _ => None,
        })
        .collect();
    j.raw("cert_chain", json_list(chain.into_iter()));
    Ok(())
}

fn decode_health(m: &[u8], j: &mut Obj) -> Res<()> {
    let mut status = 0;
    for (n, v) in fields(m)? {
        if let (1, Value::Varint(s)) = (n, v) {
            status = s;
        }
    }
    let name = ["UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"].get(status as usize).copied().unwrap_or("?");
    j.str("status", name);
    Ok(())
}

fn call_spec(a: &Args, sub: &str) -> Res<(CallSpec, fn(&[u8], &mut Obj) -> Res<()>)> {
    let mut metadata: Vec<(String, String)> = Vec::new();
    if let Some(t) = a.get("grpc-timeout") {
        metadata.push(("grpc-timeout".into(), t.into()));
    }
    for kv in a.all("meta") {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--meta {}: want key=value", kv))?;
        metadata.push((k.into(), v.into()));
    }
    let (path, message, decode): (&str, Vec<u8>, fn(&[u8], &mut Obj) -> Res<()>) = match sub {
        "ca-create" => {
            if let Some(f) = a.get("token-file") {
                let token = String::from_utf8_lossy(&read_file(f)?).trim().to_string();
                metadata.push(("authorization".into(), format!("Bearer {}", token)));
            }
            if let Some(c) = a.get("cluster-id") {
                metadata.push(("clusterid".into(), c.into()));
            }
            ("/istio.v1.auth.IstioCertificateService/CreateCertificate", istio_certificate_request(a)?, decode_certificate_response)
        }
        "health" => {
            let mut m = Vec::new();
            if let Some(s) = a.get("service").filter(|s| !s.is_empty()) {
                put_bytes(&mut m, 1, s.as_bytes());
            }
            ("/grpc.health.v1.Health/Check", m, decode_health)
        }
        other => return Err(format!("unknown subcommand {} (ca-create, health)", other)),
    };
    let chunk = a.num("chunk", 16 * 1024)?;
    Ok((CallSpec { path: path.into(), metadata, message, chunk, body_once: a.has("body-once"), sensitive: a.has("sensitive") }, decode))
}

/// Runs the subcommand's calls on one connection and returns the JSON line.
async fn run(sub: &str, a: &Args, deadline: tokio::time::Instant) -> Res<String> {
    let (spec, decode) = call_spec(a, sub)?;
    let streams: usize = a.num("streams", 1)?;
    let mut conn = connect(a).await?;
    let (go_tx, go_rx) = watch::channel(false);
    let hold = a.has("hold");
    if hold {
        // Released by one line on stdin (the test first begins the server's graceful stop).
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            let _ = go_tx.send(true);
        });
    }
    let mut j = Obj::new();
    if a.has("warmup") {
        // One call first, so the server's SETTINGS (MAX_CONCURRENT_STREAMS) are in before the burst.
        let w = start_call(&mut conn, &spec, None, Cancel::No).await?.await.map_err(|e| format!("call task: {}", e))?;
        j.raw("warmup", outcome_json(&w, decode));
    }
    let (mid, after): (usize, usize) = (a.num("cancel-mid", 0)?, a.num("cancel-after", 0)?);
    let mut calls = Vec::with_capacity(streams);
    for i in 0..streams {
        let cancel = if i < mid { Cancel::Mid } else if i < mid + after { Cancel::After } else { Cancel::No };
        calls.push(start_call(&mut conn, &spec, if hold { Some(go_rx.clone()) } else { None }, cancel).await?);
    }
    let mut outcomes = Vec::with_capacity(streams);
    for c in calls {
        outcomes.push(match tokio::time::timeout_at(deadline, c).await {
            Ok(o) => o.map_err(|e| format!("call task: {}", e))?,
            Err(_) => Outcome { error: Some("no response by the deadline (--timeout-ms)".into()), ..Outcome::default() },
        });
    }
    let ok = outcomes.iter().filter(|o| o.error.is_none() && o.grpc_status == Some(0)).count();
    j.str("alpn", &conn.alpn).raw("ok_calls", ok.to_string());
    j.raw("calls", json_list(outcomes.iter().map(|o| outcome_json(o, decode))));
    if a.has("late-call") {
        // A call after the others, on the same connection (refused once the server sent GOAWAY).
        let late = match start_call(&mut conn, &CallSpec { body_once: true, ..spec }, None, Cancel::No).await {
            Ok(h) => outcome_json(&h.await.map_err(|e| e.to_string())?, decode),
            Err(e) => Obj::new().str("error", &e).render(),
        };
        j.raw("late_call", late);
    }
    drop(conn.tx);
    let end = match tokio::time::timeout(Duration::from_secs(5), conn.task).await {
        Ok(Ok(Ok(()))) => "closed".to_string(),
        Ok(Ok(Err(e))) => format!("error: {}", e),
        Ok(Err(e)) => format!("task: {}", e),
        Err(_) => "still open 5 s after the last call".to_string(),
    };
    j.str("connection", &end);
    Ok(j.render())
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = (|| -> Res<String> {
        let sub = argv.first().ok_or("usage: rust-h2-client ca-create|health --target host:port ...")?;
        let a = Args::parse(&argv[1..])?;
        // Calls unanswered by the deadline are reported as such; the whole run is cut 5 s later.
        let timeout = Duration::from_millis(a.num("timeout-ms", 20_000)?);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        rt.block_on(async {
            let deadline = tokio::time::Instant::now() + timeout;
            let cut = timeout + Duration::from_secs(5);
            tokio::time::timeout(cut, run(sub, &a, deadline)).await.map_err(|_| format!("no result within {:?}", cut))?
        })
    })();
    match result {
        Ok(line) => println!("{}", line),
        Err(e) => {
            eprintln!("rust-h2-client: {}", e);
            std::process::exit(1);
        }
    }
}
