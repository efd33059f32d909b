// An independent leaf encoder for test/pki/istio-leaf-conformance.test.ts: istiod's workload
// signing path done with Go's crypto/x509 as Istio does it (security/pkg/pki/ca sign ->
// util.GenCertFromCSR -> genCertTemplateFromCSR + BuildSubjectAltNameExtension):
//
//   - parse the CSR, check its signature, certify csr.PublicKey (the CSR's subject and SANs
//     are otherwise ignored; the identity comes from the caller);
//   - template: empty subject, serial = 128-bit random, NotBefore = now - 2 min,
//     NotAfter = now + ttl, KeyUsage digitalSignature|keyEncipherment, ExtKeyUsage
//     serverAuth+clientAuth, BasicConstraintsValid with IsCA false, and the SAN as an
//     ExtraExtension: GeneralNames of [6] URIs marshalled with encoding/asn1, critical because
//     the subject is empty;
//   - x509.CreateCertificate(template, signing cert, csr.PublicKey, signing key): Go picks the
//     signature algorithm from the key, copies the issuer Name from the signing cert and puts
//     its SKI into the AKI.
//
// The two things Istio draws at random are inputs here so a test can compare bytes: the 16
// bytes rand.Int(rand.Reader, 2^128) would read (serialHex) and the clock (nowUnixMilli).
//
// stdin:  {"cases":[{"signerCertPem","signerKeyPem" | "cacertsDir", "csrPem", "nowUnixMilli",
//
//	"ttlSeconds", "serialHex", "spiffeId"}, ...]}
//
// stdout: [{"certPem": "..."} | {"error": "..."}, ...] in the same order.
package main

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type leafCase struct {
	SignerCertPem string `json:"signerCertPem"`
	SignerKeyPem  string `json:"signerKeyPem"`
	// An Istio plug-in CA directory; when set, the signer is its ca-cert.pem and ca-key.pem.
	CacertsDir   string `json:"cacertsDir"`
	CsrPem       string `json:"csrPem"`
	NowUnixMilli int64  `json:"nowUnixMilli"`
	TtlSeconds   int64  `json:"ttlSeconds"`
	SerialHex    string `json:"serialHex"`
	SpiffeID     string `json:"spiffeId"`
}

type leafResult struct {
	CertPem string `json:"certPem,omitempty"`
	Error   string `json:"error,omitempty"`
}

// istiod backdates every leaf by this much for clock skew between CA and workloads.
const clockSkewGracePeriod = 2 * time.Minute

const uriGeneralNameTag = 6

var oidSubjectAltName = asn1.ObjectIdentifier{2, 5, 29, 17}

func decodeOne(text []byte, what string) (*pem.Block, error) {
	block, _ := pem.Decode(text)
	if block == nil {
		return nil, fmt.Errorf("%s: no PEM block", what)
	}
	return block, nil
}

// loadSigner reads the signing certificate and key the way Istio's LoadSignerCredsFromFiles
// accepts them (PKCS#8, SEC 1 EC or PKCS#1 RSA keys).
func loadSigner(c leafCase) (*x509.Certificate, crypto.Signer, error) {
	certText, keyText := []byte(c.SignerCertPem), []byte(c.SignerKeyPem)
	if c.CacertsDir != "" {
		var err error
		if certText, err = os.ReadFile(filepath.Join(c.CacertsDir, "ca-cert.pem")); err != nil {
			return nil, nil, err
		}
		if keyText, err = os.ReadFile(filepath.Join(c.CacertsDir, "ca-key.pem")); err != nil {
			return nil, nil, err
		}
	}
	certBlock, err := decodeOne(certText, "signing certificate")
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("signing certificate: %w", err)
	}
	keyBlock, err := decodeOne(keyText, "signing key")
	if err != nil {
		return nil, nil, err
	}
	var key any
	switch keyBlock.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(keyBlock.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(keyBlock.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(keyBlock.Bytes)
	default:
		err = fmt.Errorf("unexpected PEM type %q", keyBlock.Type)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("signing key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("signing key cannot sign")
	}
	return cert, signer, nil
}

// subjectAltName is Istio's SAN for SPIFFE identities: one [6] IA5String per URI in a
// GeneralNames SEQUENCE, critical because the leaf's subject is empty.
func subjectAltName(spiffeIDs []string) (pkix.Extension, error) {
	names := make([]asn1.RawValue, 0, len(spiffeIDs))
	for _, id := range spiffeIDs {
		if !strings.HasPrefix(id, "spiffe://") {
			return pkix.Extension{}, fmt.Errorf("%q is not a spiffe:// URI", id)
		}
		names = append(names, asn1.RawValue{Class: asn1.ClassContextSpecific, Tag: uriGeneralNameTag, Bytes: []byte(id)})
	}
	value, err := asn1.Marshal(names)
	if err != nil {
		return pkix.Extension{}, err
	}
	return pkix.Extension{Id: oidSubjectAltName, Critical: true, Value: value}, nil
}

// workloadTemplate is genCertTemplateFromCSR for a non-CA leaf.
func workloadTemplate(csr *x509.CertificateRequest, spiffeIDs []string, serial *big.Int, now time.Time, ttl time.Duration) (*x509.Certificate, error) {
	if csr.Subject.CommonName != "" {
		// istiod then puts a dual-use CN into the subject; ztunnel CSRs have none.
		return nil, errors.New("CSR has a CommonName: the dual-use subject is not modelled here")
	}
	san, err := subjectAltName(spiffeIDs)
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{},
		NotBefore:             now.Add(-clockSkewGracePeriod),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:                  false,
		BasicConstraintsValid: true,
		ExtraExtensions:       []pkix.Extension{san},
	}, nil
}

func issue(c leafCase) ([]byte, error) {
	signingCert, signingKey, err := loadSigner(c)
	if err != nil {
		return nil, err
	}
	csrBlock, err := decodeOne([]byte(c.CsrPem), "CSR")
	if err != nil {
		return nil, err
	}
	csr, err := x509.ParseCertificateRequest(csrBlock.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CSR: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("CSR signature: %w", err)
	}
	randomBits, err := hex.DecodeString(c.SerialHex)
	if err != nil || len(randomBits) != 16 {
		return nil, fmt.Errorf("serialHex must be 16 bytes of hex, got %q", c.SerialHex)
	}
	// rand.Int(rand.Reader, 2^128) reads 16 bytes and returns them as a big-endian number.
	serial := new(big.Int).SetBytes(randomBits)
	if c.TtlSeconds <= 0 {
		return nil, fmt.Errorf("ttlSeconds must be positive, got %d", c.TtlSeconds)
	}
	tmpl, err := workloadTemplate(csr, []string{c.SpiffeID}, serial, time.UnixMilli(c.NowUnixMilli), time.Duration(c.TtlSeconds)*time.Second)
	if err != nil {
		return nil, err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signingCert, csr.PublicKey, signingKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

func main() {
	var input struct {
		Cases []leafCase `json:"cases"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&input); err != nil {
		fmt.Fprintf(os.Stderr, "reading cases from stdin: %v\n", err)
		os.Exit(2)
	}
	results := make([]leafResult, len(input.Cases))
	for i, c := range input.Cases {
		if certPem, err := issue(c); err != nil {
			results[i].Error = err.Error()
		} else {
			results[i].CertPem = string(certPem)
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "writing results: %v\n", err)
		os.Exit(2)
	}
}
