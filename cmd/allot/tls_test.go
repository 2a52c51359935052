package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/server"
)

// cliPKI is a CA with a server certificate (127.0.0.1 and server.allot.test)
// and a client certificate, as PEM files.
type cliPKI struct {
	dir                  string
	ca, cert, key        string
	clientCert, clientKy string
	pool                 *x509.CertPool
}

func newCLIPKI(t *testing.T) *cliPKI {
	t.Helper()
	dir := t.TempDir()
	p := &cliPKI{dir: dir, ca: filepath.Join(dir, "ca.pem"), cert: filepath.Join(dir, "server.pem"),
		key: filepath.Join(dir, "server-key.pem"), clientCert: filepath.Join(dir, "cli.pem"), clientKy: filepath.Join(dir, "cli-key.pem")}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "allot CLI test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	writeCLIPEM(t, p.ca, "CERTIFICATE", caDER)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, certFile, keyFile string, ips []net.IP, dns []string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: ips, DNSNames: dns, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		writeCLIPEM(t, certFile, "CERTIFICATE", der)
		kb, _ := x509.MarshalECPrivateKey(key)
		writeCLIPEM(t, keyFile, "EC PRIVATE KEY", kb)
	}
	leaf(2, "server.allot.test", x509.ExtKeyUsageServerAuth, p.cert, p.key, []net.IP{net.ParseIP("127.0.0.1")}, []string{"server.allot.test"})
	leaf(3, "allot-cli", x509.ExtKeyUsageClientAuth, p.clientCert, p.clientKy, nil, nil)
	return p
}

func writeCLIPEM(t *testing.T, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// tlsDevAPI starts an in-process -dev server serving https and returns its
// https URL.
func tlsDevAPI(t *testing.T, p *cliPKI) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Config{Dev: true, Token: cliToken, HTTPListener: ln, ReconcileInterval: time.Hour,
		TLS: server.TLSConfig{HTTP: true, CertFile: p.cert, KeyFile: p.key}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown() })
	addr := "https://" + ln.Addr().String()
	cl, _ := client.New(addr, "", &tls.Config{RootCAs: p.pool})
	waitUntil(t, "the https dev server to lead", func() bool {
		_, err := cl.Budgets(context.Background(), false)
		return err == nil
	})
	return addr
}

// TestCLIOverTLS runs every command that talks to a server against an
// https -dev server, with the CA given by flag and by environment.
func TestCLIOverTLS(t *testing.T) {
	p := newCLIPKI(t)
	addr := tlsDevAPI(t, p)
	examples := filepath.Join("..", "..", "examples", "budgets")

	code, _, errOut := runCLI(t, "queue", "-address", addr)
	if code != exitInvalid || !strings.Contains(errOut, "server certificate not trusted") || !strings.Contains(errOut, "-ca-cert") {
		t.Fatalf("https without the CA: %d %q, want the certificate refused and -ca-cert suggested", code, errOut)
	}
	code, out, errOut := runCLI(t, "budgets", "apply", "-address", addr, "-ca-cert", p.ca, "-token", cliToken, "-revision", "tls1", examples)
	if code != exitOK || !strings.Contains(out, "Applied budget tree tls1") {
		t.Fatalf("budgets apply over https: %d %q %q", code, out, errOut)
	}

	t.Setenv("ALLOT_ADDR", addr)
	t.Setenv("ALLOT_CACERT", p.ca)
	t.Setenv("ALLOT_TOKEN", cliToken)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queue"}, "No managed jobs"},
		{[]string{"usage", "-json"}, `"owed_gpu_hours"`},
		{[]string{"nodes"}, "No GPU nodes"},
		{[]string{"operator", "raft", "list-peers"}, "leader"},
		{[]string{"budgets", "apply", "-revision", "tls2", examples}, "Applied budget tree tls2"},
		// The certificate is issued for server.allot.test as well.
		{[]string{"queue", "-tls-server-name", "server.allot.test"}, "No managed jobs"},
	} {
		code, out, errOut := runCLI(t, tc.args...)
		if code != exitOK || !strings.Contains(out, tc.want) {
			t.Errorf("%v with ALLOT_CACERT: %d %q %q, want output containing %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, _, errOut = runCLI(t, "explain", "job", "default/ghost")
	if code != exitInvalid || !strings.Contains(errOut, "not managed by allot") {
		t.Errorf("explain over https: %d %q, want the server's answer", code, errOut)
	}
	code, _, errOut = runCLI(t, "queue", "-tls-server-name", "other.allot.test")
	if code != exitInvalid || !strings.Contains(errOut, "server certificate not trusted") {
		t.Errorf("-tls-server-name naming another host: %d %q, want the certificate refused", code, errOut)
	}

	t.Setenv("ALLOT_CACERT", "")
	if code, out, errOut := runCLI(t, "queue", "-tls-skip-verify"); code != exitOK || !strings.Contains(out, "No managed jobs") {
		t.Errorf("-tls-skip-verify: %d %q %q", code, out, errOut)
	}
	t.Setenv("ALLOT_SKIP_VERIFY", "true")
	if code, out, errOut := runCLI(t, "nodes"); code != exitOK || !strings.Contains(out, "No GPU nodes") {
		t.Errorf("ALLOT_SKIP_VERIFY=true: %d %q %q", code, out, errOut)
	}
}

// TestCLIClientCertificate goes through a proxy that terminates mutual TLS
// in front of the server: it serves only clients presenting a certificate
// from the CA.
func TestCLIClientCertificate(t *testing.T) {
	p := newCLIPKI(t)
	target, _ := url.Parse(tlsDevAPI(t, p))
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.pool}}
	front := httptest.NewUnstartedServer(proxy)
	cert, err := tls.LoadX509KeyPair(p.cert, p.key)
	if err != nil {
		t.Fatal(err)
	}
	front.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: p.pool, ClientAuth: tls.RequireAndVerifyClientCert}
	front.StartTLS()
	t.Cleanup(front.Close)

	t.Setenv("ALLOT_ADDR", front.URL)
	t.Setenv("ALLOT_CACERT", p.ca)
	if code, out, _ := runCLI(t, "queue"); code == exitOK {
		t.Fatalf("no client certificate: answered %q, want refused", out)
	}
	if code, out, errOut := runCLI(t, "queue", "-client-cert", p.clientCert, "-client-key", p.clientKy); code != exitOK || !strings.Contains(out, "No managed jobs") {
		t.Errorf("-client-cert/-client-key: %d %q %q", code, out, errOut)
	}
	t.Setenv("ALLOT_CLIENT_CERT", p.clientCert)
	t.Setenv("ALLOT_CLIENT_KEY", p.clientKy)
	if code, out, errOut := runCLI(t, "nodes", "-json"); code != exitOK || !strings.Contains(out, `"nodes"`) {
		t.Errorf("ALLOT_CLIENT_CERT/ALLOT_CLIENT_KEY: %d %q %q", code, out, errOut)
	}
}

func TestCLITLSFlagErrors(t *testing.T) {
	p := newCLIPKI(t)
	missing := filepath.Join(p.dir, "missing.pem")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "-ca-cert", missing}, "want a PEM file of the CA"},
		{[]string{"queue", "-ca-cert", p.key}, "holds no PEM certificate"},
		{[]string{"nodes", "-client-cert", p.clientCert}, "give both, or neither"},
		{[]string{"usage", "-client-key", p.clientKy}, "give both, or neither"},
		{[]string{"operator", "raft", "list-peers", "-client-cert", p.clientCert, "-client-key", p.key}, "client certificate"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: %d %q, want usage error containing %q", tc.args, code, errOut, tc.want)
		}
	}
}
