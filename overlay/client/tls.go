package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSOptions are the client's side of TLS to an https server, named after
// Nomad's api.TLSConfig (and the CLI's -ca-cert, -client-cert, -client-key,
// -tls-server-name, -tls-skip-verify). The zero value verifies the server
// against the system's roots.
type TLSOptions struct {
	// CACert is a PEM file of the CA (or CAs) that signed the server's
	// certificate; "" trusts the system's roots.
	CACert string
	// ClientCert and ClientKey are a PEM certificate and its key the client
	// presents, for servers that ask for one. Both or neither.
	ClientCert, ClientKey string
	// ServerName is the name the server's certificate must be issued for,
	// when it differs from the address's host (e.g. "server.global.allot"
	// behind a load balancer).
	ServerName string
	// Insecure skips verifying the server's certificate. For tests only:
	// anyone between the client and the server can read the token.
	Insecure bool
}

// Config builds the tls.Config for the options. Its errors name the option
// and say what would be valid.
func (o TLSOptions) Config() (*tls.Config, error) {
	c := &tls.Config{ServerName: o.ServerName, InsecureSkipVerify: o.Insecure, MinVersion: tls.VersionTLS12}
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("CA certificate: %w (want a PEM file of the CA that signed the server's certificate)", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA certificate %s holds no PEM certificate (want -----BEGIN CERTIFICATE-----)", o.CACert)
		}
		c.RootCAs = pool
	}
	switch {
	case o.ClientCert != "" && o.ClientKey != "":
		cert, err := tls.LoadX509KeyPair(o.ClientCert, o.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("client certificate %s and key %s: %w (want a PEM certificate and its PEM private key)",
				o.ClientCert, o.ClientKey, err)
		}
		c.Certificates = []tls.Certificate{cert}
	case o.ClientCert != "" || o.ClientKey != "":
		return nil, errors.New("client certificate and client key go together: give both, or neither")
	}
	return c, nil
}
