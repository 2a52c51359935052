package main

import (
	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/overlay/client"
)

// tlsFlags are the client TLS flags of every command that talks to a
// server, with environment variables named like Nomad's NOMAD_CACERT,
// NOMAD_CLIENT_CERT, NOMAD_CLIENT_KEY, NOMAD_TLS_SERVER_NAME and
// NOMAD_SKIP_VERIFY. They apply to https addresses only.
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ca-cert", Sources: cli.EnvVars("ALLOT_CACERT"),
			Usage: "PEM file of the CA that signed the server's certificate, for https addresses (env ALLOT_CACERT)"},
		&cli.StringFlag{Name: "client-cert", Sources: cli.EnvVars("ALLOT_CLIENT_CERT"),
			Usage: "PEM client certificate to present, with -client-key (env ALLOT_CLIENT_CERT)"},
		&cli.StringFlag{Name: "client-key", Sources: cli.EnvVars("ALLOT_CLIENT_KEY"),
			Usage: "PEM private key of -client-cert (env ALLOT_CLIENT_KEY)"},
		&cli.StringFlag{Name: "tls-server-name", Sources: cli.EnvVars("ALLOT_TLS_SERVER_NAME"),
			Usage: "name the server's certificate must be issued for, when not the address's host (env ALLOT_TLS_SERVER_NAME)"},
		&cli.BoolFlag{Name: "tls-skip-verify", Sources: cli.EnvVars("ALLOT_SKIP_VERIFY"),
			Usage: "do not verify the server's certificate; insecure, for tests (env ALLOT_SKIP_VERIFY)"},
	}
}

// tlsOptions reads the TLS flags of a command.
func tlsOptions(c *cli.Command) client.TLSOptions {
	return client.TLSOptions{
		CACert:     c.String("ca-cert"),
		ClientCert: c.String("client-cert"),
		ClientKey:  c.String("client-key"),
		ServerName: c.String("tls-server-name"),
		Insecure:   c.Bool("tls-skip-verify"),
	}
}
