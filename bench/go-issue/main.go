// The issue-3 Go baseline for `npm run bench:pki`: istiod's signing core done with Go's
// crypto/x509 (PEM decode, CSR parse + signature check, leaf template, ECDSA P-256 sign, PEM),
// on `-workers` goroutines for `-ms` milliseconds. Prints {"rate":..., "cores":...} as JSON.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"flag"
	"math/big"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	must(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func main() {
	ms := flag.Int("ms", 400, "measurement window")
	workers := flag.Int("workers", 1, "goroutines issuing in parallel")
	flag.Parse()

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{Organization: []string{"cluster.local"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDer, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	caCert, err := x509.ParseCertificate(caDer)
	must(err)

	// 512 distinct CSR keys, as in the Node scenarios.
	csrs := make([][]byte, 512)
	uri, _ := url.Parse("spiffe://cluster.local/ns/default/sa/sleep")
	for i := range csrs {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		must(err)
		der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{URIs: []*url.URL{uri}}, k)
		must(err)
		csrs[i] = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})
	}
	serialLimit := new(big.Int).Lsh(big.NewInt(1), 128)

	issue := func(csrPem []byte) {
		block, _ := pem.Decode(csrPem)
		csr, err := x509.ParseCertificateRequest(block.Bytes)
		must(err)
		must(csr.CheckSignature())
		serial, err := rand.Int(rand.Reader, serialLimit)
		must(err)
		t := time.Now()
		tmpl := &x509.Certificate{
			SerialNumber:          serial,
			NotBefore:             t.Add(-2 * time.Minute),
			NotAfter:              t.Add(24 * time.Hour),
			KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			BasicConstraintsValid: true,
			URIs:                  []*url.URL{uri},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, csr.PublicKey, caKey)
		must(err)
		_ = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	for i := 0; i < 300; i++ {
		issue(csrs[i%len(csrs)])
	}

	var count int64
	var wg sync.WaitGroup
	cpu0 := cpuSeconds()
	start := time.Now()
	deadline := start.Add(time.Duration(*ms) * time.Millisecond)
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w * 97; time.Now().Before(deadline); i++ {
				issue(csrs[i%len(csrs)])
				atomic.AddInt64(&count, 1)
			}
		}(w)
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	must(json.NewEncoder(os.Stdout).Encode(map[string]float64{"rate": float64(count) / wall, "cores": (cpuSeconds() - cpu0) / wall}))
}
