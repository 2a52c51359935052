package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer is raft's network: plain TCP, or mutual TLS when both tls
// configs are set (each peer presents its certificate and verifies the
// other's against the CA).
type streamLayer struct {
	ln        net.Listener
	advertise net.Addr
	server    *tls.Config // nil: plain TCP
	client    *tls.Config
}

var _ raft.StreamLayer = (*streamLayer)(nil)

func (l *streamLayer) Accept() (net.Conn, error) {
	c, err := l.ln.Accept()
	if err != nil || l.server == nil {
		return c, err
	}
	return tls.Server(c, l.server), nil
}

func (l *streamLayer) Close() error   { return l.ln.Close() }
func (l *streamLayer) Addr() net.Addr { return l.advertise }

func (l *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if l.client == nil {
		return d.Dial("tcp", string(address))
	}
	return tls.DialWithDialer(d, "tcp", string(address), l.client)
}

// setupTransport binds the raft port and builds the network transport.
func (s *Server) setupTransport() error {
	ln := s.cfg.RaftListener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(s.cfg.BindAddr, strconv.Itoa(s.cfg.RaftPort)))
		if err != nil {
			return fmt.Errorf("raft listener: %w (choose another ports.raft)", err)
		}
	}
	port := ln.Addr().(*net.TCPAddr).Port
	adv, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(s.advertiseHost(), strconv.Itoa(port)))
	if err != nil {
		ln.Close()
		return fmt.Errorf("advertise_addr: %w", err)
	}
	layer := &streamLayer{ln: ln, advertise: adv}
	if s.cfg.TLS.RPC {
		if layer.server, layer.client, err = mutualTLS(s.cfg.TLS); err != nil {
			ln.Close()
			return err
		}
		s.raftTLS = layer.client
	}
	trans := raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: s.cfg.Logger.Named("raft-net"),
	})
	s.trans, s.raftAddr = trans, adv.String()
	s.closers = append(s.closers, trans.Close)
	return nil
}

// mutualTLS builds the server and client sides of raft's mutual TLS.
func mutualTLS(c TLSConfig) (*tls.Config, *tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: cert_file/key_file: %w", err)
	}
	pool, err := loadCA(c.CAFile)
	if err != nil {
		return nil, nil, err
	}
	server := &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	client := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}

func loadCA(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: ca_file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("tls: ca_file holds no PEM certificate")
	}
	return pool, nil
}

// httpTLS returns the HTTP server's TLS config, or nil when TLS is off.
func (s *Server) httpTLS() (*tls.Config, error) {
	if !s.cfg.TLS.HTTP {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(s.cfg.TLS.CertFile, s.cfg.TLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls: cert_file/key_file: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// setupForwarding builds the HTTP client followers forward requests with
// (and joiners call peers with); it trusts the CA when one is configured.
func (s *Server) setupForwarding() error {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.cfg.TLS.HTTP && s.cfg.TLS.CAFile != "" {
		pool, err := loadCA(s.cfg.TLS.CAFile)
		if err != nil {
			return err
		}
		s.fwdTLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		tr.TLSClientConfig = s.fwdTLS
	}
	s.fwd = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	return nil
}
