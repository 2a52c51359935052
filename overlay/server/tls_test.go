package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/hashicorp/go-hclog"
)

// testPKI writes a CA and a server certificate for 127.0.0.1 (used both as
// server and client certificate, as raft peers do), plus a certificate from
// another CA that must be refused.
type testPKI struct {
	caFile, certFile, keyFile string
	rogue                     tls.Certificate
	pool                      *x509.CertPool
}

func newTestPKI(t *testing.T) *testPKI {
	dir := t.TempDir()
	caKey, caCert, caDER := selfSigned(t, "allot test CA")
	p := &testPKI{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "server.pem"), keyFile: filepath.Join(dir, "server-key.pem")}
	writePEM(t, p.caFile, "CERTIFICATE", caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "server.allot"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, p.certFile, "CERTIFICATE", der)
	kb, _ := x509.MarshalECPrivateKey(key)
	writePEM(t, p.keyFile, "EC PRIVATE KEY", kb)
	p.pool = x509.NewCertPool()
	p.pool.AddCert(caCert)
	rogueKey, _, rogueDER := selfSigned(t, "rogue")
	p.rogue = tls.Certificate{Certificate: [][]byte{rogueDER}, PrivateKey: rogueKey}
	return p
}

func selfSigned(t *testing.T, cn string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return key, cert, der
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestMutualTLSCluster runs three servers with HTTPS and mutual TLS between
// raft peers: the cluster forms and replicates, and a raft peer without a
// certificate from the CA is refused.
func TestMutualTLSCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test skipped in -short mode")
	}
	pki := newTestPKI(t)
	tlsCfg := TLSConfig{HTTP: true, RPC: true, CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile}
	type member struct{ http, raft int }
	var ms []member
	var join []string
	for i := 0; i < 3; i++ {
		m := member{freePort(t), freePort(t)}
		ms = append(ms, m)
		join = append(join, "127.0.0.1:"+strconv.Itoa(m.http))
	}
	var servers []*Server
	for i, m := range ms {
		s, err := New(Config{DataDir: t.TempDir(), BootstrapExpect: 3, RetryJoin: join, RetryInterval: 50 * time.Millisecond,
			Token: testToken, TLS: tlsCfg, Raft: fastRaft(), ReconcileInterval: time.Hour,
			HTTPListener: listenOn(t, m.http), RaftListener: listenOn(t, m.raft),
			Logger: hclog.New(&hclog.LoggerOptions{Name: "tls" + strconv.Itoa(i), Level: hclog.Off})})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown() })
		servers = append(servers, s)
	}
	cl, err := client.New("https://"+join[0], testToken, &tls.Config{RootCAs: pki.pool})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	waitFor(t, 20*time.Second, "the TLS cluster to accept a write", func() error {
		_, err := cl.ApplyBudgets(ctx, testBudgets())
		return err
	})
	waitFor(t, 10*time.Second, "replication to every server", func() error {
		for i, s := range servers {
			if b := s.FSM().Read().Budgets(); b == nil {
				return fmt.Errorf("server %d has no budgets yet", i)
			}
		}
		return nil
	})
	// Plain HTTP to a TLS server fails.
	plain, _ := client.New("http://"+join[0], "", nil)
	if _, err := plain.Budgets(ctx, true); err == nil {
		t.Error("plain HTTP was answered by a TLS server")
	}
	// A raft peer presenting a certificate from another CA is refused, while
	// one with the CA's certificate is accepted (the server then waits for
	// the rest of an RPC, so the read times out).
	good, err := tls.LoadX509KeyPair(pki.certFile, pki.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := probeRaft(servers[0].RaftAddr(), tls.Certificate(good), pki.pool); !isTimeout(err) {
		t.Fatalf("a peer with the CA's certificate: %v, want the server to wait for its RPC", err)
	}
	if err := probeRaft(servers[0].RaftAddr(), pki.rogue, pki.pool); err == nil || isTimeout(err) {
		t.Fatalf("a peer with a certificate from another CA: %v, want the handshake refused", err)
	}

	// A join for a server whose raft port presents a certificate from
	// another CA is refused, even with the operator's token: it would be a
	// voter that can never vote, and one real follower's loss would then
	// cost quorum.
	rogueLn, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pki.rogue}})
	if err != nil {
		t.Fatal(err)
	}
	defer rogueLn.Close()
	go func() {
		for {
			c, err := rogueLn.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	err = retry503(t, "the join of a server with another CA's certificate", func() error {
		return cl.Join(ctx, &client.JoinRequest{ID: "rogue", RaftAddr: rogueLn.Addr().String()})
	})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("join of a server with another CA's certificate: %v, want it refused naming the certificate", err)
	}
	for i, s := range servers {
		if s.IsLeader() {
			f := s.Raft().GetConfiguration()
			if err := f.Error(); err != nil || len(f.Configuration().Servers) != 3 {
				t.Fatalf("server %d's configuration after the refused join: %+v (%v)", i, f.Configuration().Servers, err)
			}
		}
	}
}

// probeRaft connects to a raft port with cert, sends one byte of an RPC and
// reads: a refused certificate shows as an error, an accepted one as a
// timeout.
func probeRaft(addr string, cert tls.Certificate, roots *x509.CertPool) error {
	conn, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots})
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte{0}); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
