// Command grpc-go-client is certbroker's grpc-go interop client: an independent gRPC
// implementation (Debian's grpc-go, built offline in GOPATH mode by test/support/grpc-go.ts)
// calling the CA and the node broker the way Go consumers of these APIs do. No generated code:
// the few messages are written and read with protowire, field numbers as in proto/, and a codec
// registered under the name "proto" passes the bytes through, so the wire (content-type
// application/grpc, no subtype) is the one a generated grpc-go stub produces.
//
// Each subcommand prints one JSON object per line on stdout; a call's outcome is
// {"code": "<grpc-go codes.Code name>", "message": ..., "error_info": [...], ...}.
//
//	ca-create        istio.v1.auth.IstioCertificateService/CreateCertificate over TLS
//	health           grpc.health.v1.Health/Check, then the first message of Watch
//	reflection       grpc.reflection.<v1alpha|v1>.ServerReflection: list services, and
//	                 optionally the file of a symbol, linked with its dependencies by protodesc
//	workload-fetch   SPIFFE Workload API FetchX509SVID over a Unix socket (plaintext)
//	broker-subscribe SPIFFE Broker API spiffe.broker.API/SubscribeToX509SVID (or -bundles)
//	                 over a Unix socket with mTLS, the server named by its SPIFFE ID
package main

import (
	"bufio"
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/ioutil"
	"os"
	"sort"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// rawCodec passes []byte through: messages are encoded and decoded by hand below.
type rawCodec struct{}

func (rawCodec) Marshal(v interface{}) ([]byte, error) {
	switch m := v.(type) {
	case []byte:
		return m, nil
	case *[]byte:
		return *m, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v interface{}) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

// Name is "proto": it replaces grpc-go's default codec, so calls carry content-type
// application/grpc exactly as generated stubs send it.
func (rawCodec) Name() string { return "proto" }

func init() { encoding.RegisterCodec(rawCodec{}) }

// ---- protowire helpers -------------------------------------------------------------------

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendBytes(b []byte, num protowire.Number, v []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, v)
}

func appendVarint(b []byte, num protowire.Number, v uint64) []byte {
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// field is one decoded field: bytes for length-delimited, varint otherwise.
type field struct {
	num    protowire.Number
	typ    protowire.Type
	bytes  []byte
	varint uint64
}

// fields decodes every field of a message (unknown wire types are an error).
func fields(b []byte) ([]field, error) {
	var out []field
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			f.bytes, n = v, m
		case protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			f.varint, n = v, m
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			n = m
		}
		b = b[n:]
		out = append(out, f)
	}
	return out, nil
}

// mapEntry decodes a map<string, bytes> entry (key 1, value 2).
func mapEntry(b []byte) (string, []byte, error) {
	fs, err := fields(b)
	if err != nil {
		return "", nil, err
	}
	var k string
	var v []byte
	for _, f := range fs {
		if f.num == 1 && f.typ == protowire.BytesType {
			k = string(f.bytes)
		} else if f.num == 2 && f.typ == protowire.BytesType {
			v = f.bytes
		}
	}
	return k, v, nil
}

// ---- output ------------------------------------------------------------------------------

type errorInfo struct {
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// outcome is a call's status as grpc-go reports it, ErrorInfo details decoded by genproto.
type outcome struct {
	Code      string      `json:"code"`
	Message   string      `json:"message,omitempty"`
	ErrorInfo []errorInfo `json:"error_info,omitempty"`
	// Details that grpc-go could not decode (type not registered, bad bytes).
	BadDetails []string `json:"bad_details,omitempty"`
}

func outcomeOf(err error) outcome {
	st, ok := status.FromError(err)
	if !ok {
		return outcome{Code: "NOT_A_STATUS", Message: err.Error()}
	}
	o := outcome{Code: st.Code().String(), Message: st.Message()}
	for _, d := range st.Details() {
		switch v := d.(type) {
		case *errdetails.ErrorInfo:
			o.ErrorInfo = append(o.ErrorInfo, errorInfo{Reason: v.GetReason(), Domain: v.GetDomain(), Metadata: v.GetMetadata()})
		case error:
			o.BadDetails = append(o.BadDetails, v.Error())
		default:
			o.BadDetails = append(o.BadDetails, fmt.Sprintf("%T", d))
		}
	}
	return o
}

func emit(v interface{}) {
	b, err := json.Marshal(v)
	if err != nil {
		fatal(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "grpc-go-client:", err)
	os.Exit(2)
}

func must(err error) {
	if err != nil {
		fatal(err)
	}
}

// ---- dialing -----------------------------------------------------------------------------

type dialFlags struct {
	target     string
	roots      string
	serverName string
	serverID   string
	cert       string
	key        string
	plaintext  bool
	timeout    time.Duration
}

func (d *dialFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&d.target, "target", "", "host:port or unix:///path")
	fs.StringVar(&d.roots, "roots", "", "PEM roots to verify the server with (TLS)")
	fs.StringVar(&d.serverName, "server-name", "", "DNS name the server certificate must carry (TLS)")
	fs.StringVar(&d.serverID, "server-id", "", "SPIFFE ID (URI SAN) the server certificate must carry instead of a DNS name (TLS)")
	fs.StringVar(&d.cert, "cert", "", "client certificate chain PEM (mTLS)")
	fs.StringVar(&d.key, "key", "", "client private key PEM (mTLS)")
	fs.BoolVar(&d.plaintext, "plaintext", false, "no TLS (the Workload API socket)")
	fs.DurationVar(&d.timeout, "timeout", 20*time.Second, "deadline of the whole command")
}

func readRoots(path string) *x509.CertPool {
	pemBytes, err := ioutil.ReadFile(path)
	must(err)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		fatal(fmt.Errorf("no certificate in %s", path))
	}
	return pool
}

// verifySpiffeID checks the server's chain against roots and its leaf's only URI SAN against
// want, as SPIFFE peers are named (go-spiffe's tlsconfig.AuthorizeID does the same).
func verifySpiffeID(roots *x509.CertPool, want string) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("server sent no certificate")
		}
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, r := range raw {
			c, err := x509.ParseCertificate(r)
			if err != nil {
				return err
			}
			certs = append(certs, c)
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		if _, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return err
		}
		if len(certs[0].URIs) != 1 || certs[0].URIs[0].String() != want {
			return fmt.Errorf("server certificate names %v, want %s", certs[0].URIs, want)
		}
		return nil
	}
}

// subcommand starts a subcommand's flags with the dial flags every subcommand takes.
func subcommand(name string) (*flag.FlagSet, *dialFlags) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	d := &dialFlags{}
	d.register(fs)
	return fs, d
}

// connect dials within the command's deadline: the context, the connection, and what releases both.
func (d *dialFlags) connect() (context.Context, *grpc.ClientConn, func()) {
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout)
	conn := d.dial(ctx)
	return ctx, conn, func() {
		conn.Close()
		cancel()
	}
}

func (d *dialFlags) dial(ctx context.Context) *grpc.ClientConn {
	if d.target == "" {
		fatal(errors.New("-target is required"))
	}
	opts := []grpc.DialOption{grpc.WithBlock()}
	if d.plaintext {
		opts = append(opts, grpc.WithInsecure())
	} else {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if d.roots != "" {
			cfg.RootCAs = readRoots(d.roots)
		}
		if d.serverID != "" {
			// Named by SPIFFE ID, not DNS: Go's hostname check is replaced by the URI SAN check.
			cfg.InsecureSkipVerify = true
			cfg.VerifyPeerCertificate = verifySpiffeID(cfg.RootCAs, d.serverID)
		} else {
			cfg.ServerName = d.serverName
		}
		if d.cert != "" {
			pair, err := tls.LoadX509KeyPair(d.cert, d.key)
			must(err)
			cfg.Certificates = []tls.Certificate{pair}
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	conn, err := grpc.DialContext(ctx, d.target, opts...)
	if err != nil {
		fatal(fmt.Errorf("dial %s: %w", d.target, err))
	}
	return conn
}

// ---- ca-create ---------------------------------------------------------------------------

// istioCertificateRequest: csr = 1, validity_duration = 3, metadata = 4 (google.protobuf.Struct:
// fields = 1, map<string, Value>; Value.string_value = 3).
func istioCertificateRequest(csr string, ttl int64, meta map[string]string) []byte {
	var b []byte
	b = appendString(b, 1, csr)
	if ttl != 0 {
		b = appendVarint(b, 3, uint64(ttl))
	}
	if len(meta) > 0 {
		keys := make([]string, 0, len(meta))
		for k := range meta {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var st []byte
		for _, k := range keys {
			value := appendString(nil, 3, meta[k])
			var entry []byte
			entry = appendString(entry, 1, k)
			entry = appendBytes(entry, 2, value)
			st = appendBytes(st, 1, entry)
		}
		b = appendBytes(b, 4, st)
	}
	return b
}

func caCreate(args []string) {
	fs, d := subcommand("ca-create")
	tokenFile := fs.String("token-file", "", "bearer token (authorization: Bearer ...)")
	clusterID := fs.String("cluster-id", "", "clusterid metadata (none when empty)")
	csrFile := fs.String("csr-file", "", "CSR PEM")
	ttl := fs.Int64("ttl", 0, "validity_duration in seconds (0: not sent)")
	impersonate := fs.String("impersonate", "", "ImpersonatedIdentity in the request's Struct metadata")
	rawHex := fs.String("raw-request", "", "send these bytes (hex) as the request instead of building one")
	must(fs.Parse(args))

	var req []byte
	if *rawHex != "" {
		var err error
		req, err = hex.DecodeString(*rawHex)
		must(err)
	} else {
		csr, err := ioutil.ReadFile(*csrFile)
		must(err)
		meta := map[string]string{}
		if *impersonate != "" {
			meta["ImpersonatedIdentity"] = *impersonate
		}
		req = istioCertificateRequest(string(csr), *ttl, meta)
	}
	md := metadata.MD{}
	if *tokenFile != "" {
		tok, err := ioutil.ReadFile(*tokenFile)
		must(err)
		md.Set("authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	if *clusterID != "" {
		md.Set("clusterid", *clusterID)
	}
	ctx, conn, done := d.connect()
	defer done()
	var resp []byte
	var header, trailer metadata.MD
	err := conn.Invoke(metadata.NewOutgoingContext(ctx, md), "/istio.v1.auth.IstioCertificateService/CreateCertificate", req, &resp, grpc.Header(&header), grpc.Trailer(&trailer))
	out := struct {
		outcome
		CertChain []string `json:"cert_chain,omitempty"`
		// The response's content-type as grpc-go received it.
		ContentType []string `json:"content_type,omitempty"`
		// certbroker's error code trailer (certbroker-error-code), as grpc-go received it.
		ErrorCode []string `json:"error_code,omitempty"`
	}{outcome: outcomeOf(err), ContentType: header.Get("content-type"), ErrorCode: trailer.Get("certbroker-error-code")}
	if err == nil {
		out.Code = codes.OK.String()
		fsd, derr := fields(resp)
		must(derr)
		for _, f := range fsd {
			if f.num == 1 && f.typ == protowire.BytesType {
				out.CertChain = append(out.CertChain, string(f.bytes))
			}
		}
	}
	emit(out)
}

// ---- health ------------------------------------------------------------------------------

var servingStatus = map[uint64]string{0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}

type healthResult struct {
	outcome
	Status string `json:"status,omitempty"`
}

func healthStatus(resp []byte) string {
	fsd, err := fields(resp)
	must(err)
	st := uint64(0)
	for _, f := range fsd {
		if f.num == 1 && f.typ == protowire.VarintType {
			st = f.varint
		}
	}
	if s, ok := servingStatus[st]; ok {
		return s
	}
	return fmt.Sprintf("%d", st)
}

func health(args []string) {
	fs, d := subcommand("health")
	service := fs.String("service", "", "HealthCheckRequest.service (empty: the whole server)")
	must(fs.Parse(args))
	ctx, conn, done := d.connect()
	defer done()
	var req []byte
	if *service != "" {
		req = appendString(req, 1, *service)
	}

	var resp []byte
	err := conn.Invoke(ctx, "/grpc.health.v1.Health/Check", req, &resp)
	check := healthResult{outcome: outcomeOf(err)}
	if err == nil {
		check.Code = codes.OK.String()
		check.Status = healthStatus(resp)
	}

	watch := healthResult{}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	stream, err := conn.NewStream(wctx, &grpc.StreamDesc{ServerStreams: true}, "/grpc.health.v1.Health/Watch")
	if err == nil {
		err = stream.SendMsg(req)
	}
	if err == nil {
		err = stream.CloseSend()
	}
	if err == nil {
		var first []byte
		err = stream.RecvMsg(&first)
		if err == nil {
			watch.Status = healthStatus(first)
		}
	}
	watch.outcome = outcomeOf(err)
	if err == nil {
		watch.Code = codes.OK.String()
	}
	emit(map[string]healthResult{"check": check, "watch": watch})
}

// ---- reflection --------------------------------------------------------------------------

// ServerReflectionRequest: host = 1, file_by_filename = 3, file_containing_symbol = 4,
// list_services = 7. ServerReflectionResponse: file_descriptor_response = 4
// (FileDescriptorResponse.file_descriptor_proto = 1, repeated bytes), list_services_response = 6
// (ListServiceResponse.service = 1, ServiceResponse.name = 1), error_response = 7
// (ErrorResponse.error_code = 1, error_message = 2).
type reflectionReply struct {
	services []string
	files    [][]byte
	errCode  uint64
	errMsg   string
	isError  bool
}

func parseReflection(b []byte) reflectionReply {
	var r reflectionReply
	fsd, err := fields(b)
	must(err)
	for _, f := range fsd {
		switch {
		case f.num == 6 && f.typ == protowire.BytesType:
			svcs, err := fields(f.bytes)
			must(err)
			for _, s := range svcs {
				if s.num != 1 || s.typ != protowire.BytesType {
					continue
				}
				names, err := fields(s.bytes)
				must(err)
				for _, n := range names {
					if n.num == 1 && n.typ == protowire.BytesType {
						r.services = append(r.services, string(n.bytes))
					}
				}
			}
		case f.num == 4 && f.typ == protowire.BytesType:
			fds, err := fields(f.bytes)
			must(err)
			for _, fd := range fds {
				if fd.num == 1 && fd.typ == protowire.BytesType {
					r.files = append(r.files, fd.bytes)
				}
			}
		case f.num == 7 && f.typ == protowire.BytesType:
			r.isError = true
			es, err := fields(f.bytes)
			must(err)
			for _, e := range es {
				if e.num == 1 && e.typ == protowire.VarintType {
					r.errCode = e.varint
				} else if e.num == 2 && e.typ == protowire.BytesType {
					r.errMsg = string(e.bytes)
				}
			}
		}
	}
	return r
}

func reflection(args []string) {
	fs, d := subcommand("reflection")
	version := fs.String("version", "v1alpha", "v1alpha | v1")
	symbol := fs.String("symbol", "", "also fetch the file defining this service and link it (and its imports) with protodesc")
	must(fs.Parse(args))
	ctx, conn, done := d.connect()
	defer done()

	type methodInfo struct {
		Name   string   `json:"name"`
		Input  string   `json:"input"`
		Output string   `json:"output"`
		Fields []string `json:"input_fields"`
		Server bool     `json:"server_streaming"`
	}
	out := struct {
		outcome
		Services []string     `json:"services,omitempty"`
		File     string       `json:"file,omitempty"`
		Imports  []string     `json:"imports,omitempty"`
		Methods  []methodInfo `json:"methods,omitempty"`
		LinkErr  string       `json:"link_error,omitempty"`
	}{}

	stream, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/grpc.reflection."+*version+".ServerReflection/ServerReflectionInfo")
	ask := func(req []byte) (reflectionReply, error) {
		if err := stream.SendMsg(req); err != nil {
			return reflectionReply{}, err
		}
		var resp []byte
		if err := stream.RecvMsg(&resp); err != nil {
			return reflectionReply{}, err
		}
		return parseReflection(resp), nil
	}
	if err == nil {
		var r reflectionReply
		r, err = ask(appendString(nil, 7, "*"))
		out.Services = r.services
	}
	if err == nil && *symbol != "" {
		// Every file the server sends, then each missing import by name, until the set is closed.
		files := map[string]*descriptorpb.FileDescriptorProto{}
		var order []string
		add := func(raw [][]byte) {
			for _, b := range raw {
				fdp := &descriptorpb.FileDescriptorProto{}
				must(proto.Unmarshal(b, fdp))
				if _, seen := files[fdp.GetName()]; !seen {
					files[fdp.GetName()] = fdp
					order = append(order, fdp.GetName())
				}
			}
		}
		var r reflectionReply
		r, err = ask(appendString(nil, 4, *symbol))
		if err == nil && r.isError {
			out.LinkErr = fmt.Sprintf("file_containing_symbol: error %d %s", r.errCode, r.errMsg)
		}
		add(r.files)
		for i := 0; err == nil && i < len(order); i++ {
			for _, dep := range files[order[i]].GetDependency() {
				if _, ok := files[dep]; ok {
					continue
				}
				r, err = ask(appendString(nil, 3, dep))
				if err == nil && r.isError {
					out.LinkErr = fmt.Sprintf("file_by_filename %s: error %d %s", dep, r.errCode, r.errMsg)
				}
				add(r.files)
			}
		}
		if err == nil && len(order) > 0 {
			set := &descriptorpb.FileDescriptorSet{}
			for _, name := range order {
				set.File = append(set.File, files[name])
			}
			reg, lerr := protodesc.NewFiles(set)
			if lerr != nil {
				out.LinkErr = lerr.Error()
			} else if desc, ferr := reg.FindDescriptorByName(protoreflect.FullName(*symbol)); ferr != nil {
				out.LinkErr = ferr.Error()
			} else if svc, ok := desc.(protoreflect.ServiceDescriptor); ok {
				out.File = svc.ParentFile().Path()
				imports := svc.ParentFile().Imports()
				for i := 0; i < imports.Len(); i++ {
					out.Imports = append(out.Imports, imports.Get(i).Path())
				}
				for i := 0; i < svc.Methods().Len(); i++ {
					m := svc.Methods().Get(i)
					mi := methodInfo{Name: string(m.Name()), Input: string(m.Input().FullName()), Output: string(m.Output().FullName()), Server: m.IsStreamingServer()}
					for j := 0; j < m.Input().Fields().Len(); j++ {
						f := m.Input().Fields().Get(j)
						kind := f.Kind().String()
						if f.Message() != nil {
							kind = string(f.Message().FullName())
						}
						mi.Fields = append(mi.Fields, fmt.Sprintf("%d:%s:%s", f.Number(), f.Name(), kind))
					}
					out.Methods = append(out.Methods, mi)
				}
			}
		}
	}
	if stream != nil {
		stream.CloseSend()
	}
	out.outcome = outcomeOf(err)
	if err == nil {
		out.Code = codes.OK.String()
	}
	emit(out)
}

// ---- SVID responses (Workload API X509SVIDResponse, Broker API SubscribeToX509SVIDResponse) --

type svidJSON struct {
	SpiffeID string `json:"spiffe_id"`
	// Certificates in x509_svid (ASN.1 DER, concatenated), parsed by crypto/x509.
	CertDers int `json:"cert_ders"`
	// The leaf's URI SANs as crypto/x509 reads them.
	LeafURIs []string `json:"leaf_uris"`
	// x509_svid_key parsed as PKCS#8 and matching the leaf's public key.
	KeyMatches bool `json:"key_matches"`
	// Certificates in bundle (DER, concatenated).
	BundleCerts int `json:"bundle_certs"`
	// The leaf verifies against bundle with crypto/x509 (the chain in x509_svid as intermediates).
	Verified    string `json:"verified"`
	Hint        string `json:"hint,omitempty"`
	LeafPEM     string `json:"leaf_pem"`
	NotAfterUTC string `json:"not_after"`
}

type svidResponseJSON struct {
	Svids            []svidJSON     `json:"svids"`
	Crl              int            `json:"crl"`
	FederatedBundles map[string]int `json:"federated_bundles"`
}

// X509SVID: spiffe_id = 1, x509_svid = 2, x509_svid_key = 3, bundle = 4, hint = 5.
func parseSvid(b []byte) svidJSON {
	var s svidJSON
	var der, key, bundle []byte
	fsd, err := fields(b)
	must(err)
	for _, f := range fsd {
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			s.SpiffeID = string(f.bytes)
		case 2:
			der = f.bytes
		case 3:
			key = f.bytes
		case 4:
			bundle = f.bytes
		case 5:
			s.Hint = string(f.bytes)
		}
	}
	certs, err := x509.ParseCertificates(der)
	if err != nil {
		s.Verified = "x509_svid: " + err.Error()
		return s
	}
	s.CertDers = len(certs)
	if len(certs) == 0 {
		s.Verified = "x509_svid is empty"
		return s
	}
	leaf := certs[0]
	s.LeafPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Raw}))
	s.NotAfterUTC = leaf.NotAfter.UTC().Format(time.RFC3339)
	for _, u := range leaf.URIs {
		s.LeafURIs = append(s.LeafURIs, u.String())
	}
	if k, err := x509.ParsePKCS8PrivateKey(key); err == nil {
		if pub, ok := k.(crypto.Signer); ok {
			if eq, ok := pub.Public().(interface{ Equal(crypto.PublicKey) bool }); ok {
				s.KeyMatches = eq.Equal(leaf.PublicKey)
			}
		}
	}
	roots, err := x509.ParseCertificates(bundle)
	if err != nil {
		s.Verified = "bundle: " + err.Error()
		return s
	}
	s.BundleCerts = len(roots)
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r)
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		s.Verified = err.Error()
	} else {
		s.Verified = "ok"
	}
	return s
}

// X509SVIDResponse / SubscribeToX509SVIDResponse: svids = 1, crl = 2, federated_bundles = 3.
func parseSvidResponse(b []byte) svidResponseJSON {
	r := svidResponseJSON{Svids: []svidJSON{}, FederatedBundles: map[string]int{}}
	fsd, err := fields(b)
	must(err)
	for _, f := range fsd {
		if f.typ != protowire.BytesType {
			continue
		}
		switch f.num {
		case 1:
			r.Svids = append(r.Svids, parseSvid(f.bytes))
		case 2:
			r.Crl++
		case 3:
			k, v, err := mapEntry(f.bytes)
			must(err)
			certs, _ := x509.ParseCertificates(v)
			r.FederatedBundles[k] = len(certs)
		}
	}
	return r
}

// X509BundlesResponse / SubscribeToX509BundlesResponse: crl = 1, bundles = 2 (map<string, bytes>).
func parseBundlesResponse(b []byte) map[string]int {
	out := map[string]int{}
	fsd, err := fields(b)
	must(err)
	for _, f := range fsd {
		if f.num == 2 && f.typ == protowire.BytesType {
			k, v, err := mapEntry(f.bytes)
			must(err)
			certs, err := x509.ParseCertificates(v)
			if err != nil {
				out[k] = -1
			} else {
				out[k] = len(certs)
			}
		}
	}
	return out
}

// serverStream opens a server-streaming call, sends req, and reads up to count messages; the
// call's outcome is the status once `count` messages arrived (OK) or the stream ended early.
func serverStream(ctx context.Context, conn *grpc.ClientConn, method string, md metadata.MD, req []byte, count int, each func([]byte)) outcome {
	sctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	defer cancel()
	stream, err := conn.NewStream(sctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err == nil {
		err = stream.SendMsg(req)
	}
	if err == nil {
		err = stream.CloseSend()
	}
	for i := 0; err == nil && i < count; i++ {
		var msg []byte
		if err = stream.RecvMsg(&msg); err == nil {
			each(msg)
		}
	}
	if err == io.EOF {
		return outcome{Code: "EOF", Message: "the stream ended with OK before the messages asked for"}
	}
	if err != nil {
		return outcomeOf(err)
	}
	return outcome{Code: codes.OK.String()}
}

// waitForGo blocks until a line arrives on stdin: the test moves this process into a pod's
// cgroup first, so the broker attests it as that pod's workload.
func waitForGo(wait bool) {
	if !wait {
		return
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fatal(fmt.Errorf("waiting for stdin: %w", err))
	}
}

// ---- workload-fetch ----------------------------------------------------------------------

func workloadFetch(args []string) {
	fs, d := subcommand("workload-fetch")
	count := fs.Int("count", 1, "responses to read")
	noHeader := fs.Bool("no-header", false, "leave out workload.spiffe.io: true")
	bundles := fs.Bool("bundles", false, "FetchX509Bundles instead of FetchX509SVID")
	wait := fs.Bool("wait-stdin", false, "connect only once a line arrives on stdin")
	must(fs.Parse(args))
	d.plaintext = true
	waitForGo(*wait)
	ctx, conn, done := d.connect()
	defer done()
	md := metadata.MD{}
	if !*noHeader {
		md.Set("workload.spiffe.io", "true")
	}
	svidStream(ctx, conn, "/SpiffeWorkloadAPI/FetchX509SVID", "/SpiffeWorkloadAPI/FetchX509Bundles", *bundles, md, nil, *count)
}

// svidStream reads `count` answers of an SVID or a bundles stream (the Workload API's and the
// Broker API's have the same response fields) and prints them with the call's outcome.
func svidStream(ctx context.Context, conn *grpc.ClientConn, svidMethod, bundlesMethod string, bundles bool, md metadata.MD, req []byte, count int) {
	out := struct {
		outcome
		Responses []svidResponseJSON `json:"responses,omitempty"`
		Bundles   []map[string]int   `json:"bundles,omitempty"`
	}{}
	method := svidMethod
	if bundles {
		method = bundlesMethod
	}
	out.outcome = serverStream(ctx, conn, method, md, req, count, func(msg []byte) {
		if bundles {
			out.Bundles = append(out.Bundles, parseBundlesResponse(msg))
		} else {
			out.Responses = append(out.Responses, parseSvidResponse(msg))
		}
	})
	emit(out)
}

// ---- broker-subscribe --------------------------------------------------------------------

// workloadReference is a WorkloadReference: reference = 1 (google.protobuf.Any: type_url = 1,
// value = 2) holding a KubernetesObjectReference (type = 1 {plural = 1, group = 2},
// key = 2 {namespace = 1, name = 2}, uid = 3) or a WorkloadPIDReference (pid = 1).
func workloadReference(typeURL, uid, namespace, name string, pid int) []byte {
	var ref []byte
	if strings.HasSuffix(typeURL, ".WorkloadPIDReference") {
		ref = appendVarint(ref, 1, uint64(pid))
	} else {
		var typ []byte
		typ = appendString(typ, 1, "pods")
		typ = appendString(typ, 2, "core")
		ref = appendBytes(ref, 1, typ)
		if name != "" {
			var key []byte
			key = appendString(key, 1, namespace)
			key = appendString(key, 2, name)
			ref = appendBytes(ref, 2, key)
		}
		if uid != "" {
			ref = appendString(ref, 3, uid)
		}
	}
	var anyMsg []byte
	anyMsg = appendString(anyMsg, 1, typeURL)
	anyMsg = appendBytes(anyMsg, 2, ref)
	return appendBytes(nil, 1, anyMsg)
}

func brokerSubscribe(args []string) {
	fs, d := subcommand("broker-subscribe")
	count := fs.Int("count", 1, "responses to read")
	noHeader := fs.Bool("no-header", false, "leave out broker.spiffe.io: true")
	bundles := fs.Bool("bundles", false, "SubscribeToX509Bundles instead of SubscribeToX509SVID")
	typeURL := fs.String("type-url", "type.googleapis.com/spiffe.broker.KubernetesObjectReference", "the reference's Any type URL")
	uid := fs.String("uid", "", "pod UID")
	namespace := fs.String("namespace", "", "pod namespace (with -name)")
	name := fs.String("name", "", "pod name")
	pid := fs.Int("pid", 0, "process ID (WorkloadPIDReference type URLs)")
	must(fs.Parse(args))
	ctx, conn, done := d.connect()
	defer done()
	md := metadata.MD{}
	if !*noHeader {
		md.Set("broker.spiffe.io", "true")
	}
	// SubscribeToX509SVIDRequest / SubscribeToX509BundlesRequest: reference = 1 (WorkloadReference).
	req := appendBytes(nil, 1, workloadReference(*typeURL, *uid, *namespace, *name, *pid))
	svidStream(ctx, conn, "/spiffe.broker.API/SubscribeToX509SVID", "/spiffe.broker.API/SubscribeToX509Bundles", *bundles, md, req, *count)
}

func main() {
	if len(os.Args) < 2 {
		fatal(errors.New("usage: grpc-go-client ca-create|health|reflection|workload-fetch|broker-subscribe [flags]"))
	}
	cmds := map[string]func([]string){
		"ca-create":        caCreate,
		"health":           health,
		"reflection":       reflection,
		"workload-fetch":   workloadFetch,
		"broker-subscribe": brokerSubscribe,
	}
	cmd, ok := cmds[os.Args[1]]
	if !ok {
		fatal(fmt.Errorf("unknown subcommand %q", os.Args[1]))
	}
	cmd(os.Args[2:])
}
