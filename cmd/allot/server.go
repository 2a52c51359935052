package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/allot-sched/allot/hcl"
	"github.com/allot-sched/allot/overlay/reconcile"
	"github.com/allot-sched/allot/overlay/server"
)

func init() { extraCommands = append(extraCommands, serverCommand) }

func serverCommand() *cli.Command {
	return &cli.Command{
		Name:  "server",
		Usage: "run an allot server (one of a raft group of 1, 3 or 5), or -dev for one in-memory server",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "dev", Usage: "one server, in-memory state, bootstrapped at once: for trying things out"},
			&cli.StringFlag{Name: "config", Usage: "server configuration file (HCL)"},
			&cli.StringFlag{Name: "token", Sources: cli.EnvVars("ALLOT_TOKEN"), Usage: "token for budget applies and ledger writes (overrides server { token }); not for operator actions"},
			&cli.StringFlag{Name: "read-token", Usage: "token required for reads (overrides server { read_token }); unset: reads are open"},
			&cli.StringFlag{Name: "budgets-token", Usage: "token for budget applies (overrides server { budgets_token })"},
			&cli.StringFlag{Name: "ledger-token", Usage: "token for ledger writes (overrides server { ledger_token })"},
			&cli.StringFlag{Name: "operator-token", Usage: "token for raft join and remove-peer and node return (overrides server { operator_token })"},
			&cli.StringFlag{Name: "node-id", Usage: "this server's raft ID (overrides node_id); unset: kept in data_dir"},
			&cli.StringFlag{Name: "bind", Usage: "bind address (overrides bind_addr)"},
			&cli.IntFlag{Name: "http-port", Usage: "HTTP port (overrides ports.http)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "trace, debug, info, warn or error (overrides log_level)"},
		}, nomadFlags()...),
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.NArg() > 0 {
				return usagef("server takes no arguments; use -config FILE or -dev")
			}
			if !c.Bool("dev") && c.String("config") == "" {
				return usagef("server needs -config FILE (see examples/) or -dev")
			}
			cfg, fc, err := serverConfig(c)
			if err != nil {
				return err
			}
			ns, err := nomadSetupFrom(c, fc)
			if err != nil {
				return err
			}
			return runServer(ctx, c, cfg, ns)
		},
	}
}

// serverConfig builds the server's configuration from the file and flags,
// and returns the file's configuration (nil without -config).
func serverConfig(c *cli.Command) (server.Config, *hcl.ServerConfig, error) {
	cfg := server.Config{Dev: c.Bool("dev")}
	level := c.String("log-level")
	var fc *hcl.ServerConfig
	if path := c.String("config"); path != "" {
		var err error
		if fc, err = hcl.LoadServerConfig(path); err != nil {
			return cfg, nil, err
		}
		applyFileConfig(&cfg, fc)
		if fc.LogLevel != nil && !c.IsSet("log-level") {
			level = *fc.LogLevel
		}
	}
	if c.IsSet("token") && (c.IsSet("budgets-token") || c.IsSet("ledger-token")) {
		return cfg, nil, usagef("-token is shorthand for -budgets-token and -ledger-token together: give one or the other")
	}
	if c.IsSet("token") {
		cfg.Tokens.Budgets, cfg.Tokens.Ledger = c.String("token"), c.String("token")
	}
	for flag, dst := range map[string]*string{"read-token": &cfg.Tokens.Read, "budgets-token": &cfg.Tokens.Budgets,
		"ledger-token": &cfg.Tokens.Ledger, "operator-token": &cfg.Tokens.Operator, "node-id": &cfg.NodeID} {
		if c.IsSet(flag) {
			*dst = c.String(flag)
		}
	}
	if c.IsSet("bind") {
		cfg.BindAddr = c.String("bind")
	}
	if c.IsSet("http-port") {
		cfg.HTTPPort = int(c.Int("http-port"))
	}
	cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "allot", Level: hclog.LevelFromString(level), Output: c.Root().ErrWriter})
	if cfg.Dev {
		if err := devTokens(c, &cfg.Tokens); err != nil {
			return cfg, nil, err
		}
	}
	return cfg, fc, nil
}

// devTokens makes up the unset tokens of a -dev server: one write token
// for budgets and ledger (printed as before, ready to paste) and an operator
// token of its own, and prints them.
func devTokens(c *cli.Command, t *server.Tokens) error {
	newToken := func() (string, error) {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", err
		}
		return hex.EncodeToString(b[:]), nil
	}
	if t.Budgets == "" && t.Ledger == "" {
		w, err := newToken()
		if err != nil {
			return err
		}
		t.Budgets, t.Ledger = w, w
	}
	if t.Operator == "" {
		op, err := newToken()
		if err != nil {
			return err
		}
		t.Operator = op
	}
	w := c.Root().Writer
	if t.Budgets == t.Ledger {
		fmt.Fprintf(w, "Dev mode: write token (export ALLOT_TOKEN=%s)\n", t.Budgets)
	} else {
		fmt.Fprintf(w, "Dev mode: budgets token %s, ledger token %s\n", t.Budgets, t.Ledger)
	}
	fmt.Fprintf(w, "Dev mode: operator token (raft join and remove-peer, nodes return): %s\n", t.Operator)
	if t.Read != "" {
		fmt.Fprintf(w, "Dev mode: read token: %s (every token above also reads)\n", t.Read)
	} else {
		fmt.Fprintln(w, "Dev mode: reads are open (no read token)")
	}
	return nil
}

func applyFileConfig(cfg *server.Config, fc *hcl.ServerConfig) {
	setStr := func(dst *string, v *string) {
		if v != nil {
			*dst = *v
		}
	}
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setStr(&cfg.DataDir, fc.DataDir)
	setStr(&cfg.BindAddr, fc.BindAddr)
	setStr(&cfg.AdvertiseAddr, fc.AdvertiseAddr)
	setInt(&cfg.BootstrapExpect, fc.BootstrapExpect)
	setInt(&cfg.HTTPPort, fc.Ports.HTTP)
	setInt(&cfg.RaftPort, fc.Ports.Raft)
	setStr(&cfg.NodeID, fc.NodeID)
	if fc.Tokens.Token != nil {
		cfg.Tokens.Budgets, cfg.Tokens.Ledger = *fc.Tokens.Token, *fc.Tokens.Token
	}
	setStr(&cfg.Tokens.Read, fc.Tokens.Read)
	setStr(&cfg.Tokens.Budgets, fc.Tokens.Budgets)
	setStr(&cfg.Tokens.Ledger, fc.Tokens.Ledger)
	setStr(&cfg.Tokens.Operator, fc.Tokens.Operator)
	setBool(&cfg.TLS.HTTP, fc.TLS.HTTP)
	setBool(&cfg.TLS.RPC, fc.TLS.RPC)
	setStr(&cfg.TLS.CAFile, fc.TLS.CAFile)
	setStr(&cfg.TLS.CertFile, fc.TLS.CertFile)
	setStr(&cfg.TLS.KeyFile, fc.TLS.KeyFile)
	cfg.RetryJoin = fc.RetryJoin
	if fc.BootstrapExpect == nil && len(fc.RetryJoin) == 0 {
		cfg.BootstrapExpect = 1 // a lone server with no peers configured
	}
}

// runServer starts the server (with the Nomad reconciler when ns says so)
// and runs until ctx ends or a signal arrives.
func runServer(ctx context.Context, c *cli.Command, cfg server.Config, ns nomadSetup) error {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var rec *reconcile.Reconciler
	cfg.Lookback = ns.Policy.Lookback
	if ns.Enabled {
		var err error
		if rec, err = startNomad(ctx, ns, cfg.Logger, c.Root().Writer); err != nil {
			return err
		}
		cfg.Reconciler = rec
	}
	s, err := server.New(cfg)
	if err != nil {
		return fmt.Errorf("starting server: %w", err)
	}
	var watched chan error
	if rec != nil {
		rec.AttachLedger(s.FSM())
		watched = make(chan error, 1)
		go func() { watched <- rec.Run(ctx) }()
	}
	if cfg.Dev {
		fmt.Fprintf(c.Root().Writer, "allot server %s (dev): HTTP API on %s, raft in memory (one server, nothing kept after exit)\n", s.ID(), s.HTTPAddr())
	} else {
		fmt.Fprintf(c.Root().Writer, "allot server %s: HTTP API on %s, raft on %s\n", s.ID(), s.HTTPAddr(), s.RaftAddr())
	}
	fmt.Fprintf(c.Root().Writer, "web UI: %s\n", serverUIURL(s.HTTPAddr(), cfg.TLS.HTTP))
	var failed error
	select {
	case <-ctx.Done():
		fmt.Fprintln(c.Root().Writer, "shutting down")
	case failed = <-s.Failed(): // the server has stopped itself
	}
	stop()
	err = s.Shutdown()
	if watched != nil {
		<-watched // ctx is done: the watcher stops
	}
	if failed != nil {
		return fmt.Errorf("allot server stopped: %w", failed)
	}
	return err
}
