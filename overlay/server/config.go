package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"runtime"
	"time"

	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
)

// Default ports: next to Nomad's 4646 (HTTP), 4647 (RPC) and 4648 (serf)
// without clashing with them.
const (
	DefaultHTTPPort = 4650
	DefaultRaftPort = 4651
)

// DefaultMaxBodyBytes bounds request bodies: a budget tree of thousands of
// budgets or a large ledger batch is far below it.
const DefaultMaxBodyBytes = 8 << 20

// Read limits and HTTP timeouts. Reads are anonymous: without bounds, 200
// concurrent reads of the whole decision log through a follower starved the
// leader of the CPU its heartbeats needed, and it stepped down.
const (
	// The default MaxConcurrentReads is one per core (GOMAXPROCS): reads
	// are CPU-bound (a page of 1000 decisions is about 250 KB of JSON), so
	// more at once only add run-queue delay to raft's heartbeats, which is
	// what deposed the leader. Measured on a loaded 2-core machine, three
	// in-process servers, 200 concurrent page reads through a follower: 64
	// at once deposed the leader in 3 runs of 3, 8 at once in 1 of 2 under
	// -race, 2 at once in none of 6 (3 of them under -race). A read waits
	// up to readQueueWait for a slot (blocked, costing no CPU) before it
	// gets 429.
	readQueueWait = time.Second
	// MaxDecisionsPage is the most decisions one GET /v1/decisions returns.
	MaxDecisionsPage = 1000
	// DefaultHTTPIdleTimeout closes idle keep-alive connections (Nomad's
	// HTTP server uses the same order of magnitude).
	DefaultHTTPIdleTimeout = 2 * time.Minute
	// httpReadHeaderTimeout, httpReadTimeout and httpWriteTimeout bound a
	// request's headers, its whole body (8 MiB at most) and the answer; a
	// forwarded request waits at most 30 s for the leader.
	httpReadHeaderTimeout = 10 * time.Second
	httpReadTimeout       = time.Minute
	httpWriteTimeout      = 2 * time.Minute
	// httpMaxHeaderBytes bounds the request line and headers: a 900 KB job
	// ID in a path gets 431 before any handler reads it.
	httpMaxHeaderBytes = 64 << 10
)

// TLSConfig turns on TLS. HTTP serves https with CertFile/KeyFile; RPC
// makes raft peers use mutual TLS, each presenting CertFile and verifying
// the other against CAFile.
type TLSConfig struct {
	HTTP     bool
	RPC      bool
	CAFile   string
	CertFile string
	KeyFile  string
}

// RaftTuning overrides raft's timing and snapshot settings; zero values
// keep raft's defaults. Tests use it for fast elections and snapshots.
type RaftTuning struct {
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
}

// Config configures a Server.
type Config struct {
	// NodeID names the server in raft. Default: kept in DataDir/node-id,
	// made up at first start.
	NodeID string
	// DataDir holds the raft log (raft.db) and snapshots. Required unless Dev.
	DataDir string
	// Dev runs one server on in-memory stores, bootstrapped at once.
	Dev bool
	// BindAddr is the address both listeners bind to.
	BindAddr string
	// AdvertiseAddr is how peers reach this server (default BindAddr; needed
	// when BindAddr is 0.0.0.0).
	AdvertiseAddr string
	HTTPPort      int
	RaftPort      int
	// BootstrapExpect is the number of servers that bootstrap the cluster
	// together; 0 joins an existing cluster through RetryJoin.
	BootstrapExpect int
	// RetryJoin lists other servers' HTTP addresses (host:port).
	RetryJoin []string
	// RetryInterval is the pause between join attempts (default 2s).
	RetryInterval time.Duration
	// Tokens authorize requests by capability (auth.go).
	Tokens Tokens
	// Token, when set, holds every capability. It is for programs that
	// embed a server (tests, tools); `allot server` sets Tokens.
	Token string
	TLS   TLSConfig
	// FSM must be identical on every server of the cluster.
	FSM  state.FSMConfig
	Raft RaftTuning
	// ReconcileInterval is how often the leader reconciles (default 5s).
	ReconcileInterval time.Duration
	// Reconciler drives the cluster on the leader; nil runs no loop.
	Reconciler Reconciler
	// Clock gives the leader's timestamps (default time.Now). The leader
	// checks it against a monotonic clock and does not obey a jump (see
	// leaderClock).
	Clock func() time.Time
	// Monotonic, when set, is the monotonic clock Clock is checked against:
	// time elapsed since any fixed instant. Default: the process's own when
	// Clock is the default, none when Clock is set (a test's clock is
	// trusted as it is).
	Monotonic func() time.Duration
	// Lookback is the policy's fair-share window; the server only shows it
	// (GET /v1/usage/series, the UI's charts). Default 7 days.
	Lookback time.Duration
	// Logger is named per component below; default: a null logger.
	Logger hclog.Logger
	// MaxBodyBytes bounds request bodies (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// MaxConcurrentReads bounds the reads served (or forwarded) at once;
	// a read beyond it waits up to a second for a slot, then gets 429
	// (default: one per core).
	MaxConcurrentReads int
	// HTTPIdleTimeout closes keep-alive connections idle that long
	// (default DefaultHTTPIdleTimeout).
	HTTPIdleTimeout time.Duration
	// HTTPListener and RaftListener, when set, are used instead of binding
	// BindAddr:HTTPPort and BindAddr:RaftPort (tests pass ready listeners
	// so that ports are known before the servers start).
	HTTPListener net.Listener
	RaftListener net.Listener
}

func (c *Config) withDefaults() Config {
	out := *c
	if out.BindAddr == "" {
		out.BindAddr = "127.0.0.1"
	}
	if out.HTTPPort == 0 {
		out.HTTPPort = DefaultHTTPPort
	}
	if out.RaftPort == 0 {
		out.RaftPort = DefaultRaftPort
	}
	if out.RetryInterval <= 0 {
		out.RetryInterval = 2 * time.Second
	}
	if out.ReconcileInterval <= 0 {
		out.ReconcileInterval = 5 * time.Second
	}
	if out.Clock == nil {
		out.Clock = time.Now
	}
	if out.Lookback <= 0 {
		out.Lookback = 7 * 24 * time.Hour
	}
	if out.Logger == nil {
		out.Logger = hclog.NewNullLogger()
	}
	if out.MaxBodyBytes <= 0 {
		out.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if out.MaxConcurrentReads <= 0 {
		out.MaxConcurrentReads = runtime.GOMAXPROCS(0)
	}
	if out.HTTPIdleTimeout <= 0 {
		out.HTTPIdleTimeout = DefaultHTTPIdleTimeout
	}
	return out
}

// validate names the first bad field and what would be valid.
func (c *Config) validate() error {
	var errs []error
	if !c.Dev && c.DataDir == "" {
		errs = append(errs, errors.New("data_dir is required (or run with -dev for in-memory state)"))
	}
	if c.BootstrapExpect < 0 {
		errs = append(errs, fmt.Errorf("bootstrap_expect = %d: want 0 (join an existing cluster) or 1, 3 or 5", c.BootstrapExpect))
	}
	if c.BootstrapExpect == 0 && len(c.RetryJoin) == 0 && !c.Dev {
		errs = append(errs, errors.New("bootstrap_expect = 0 needs retry_join to find a cluster to join"))
	}
	if c.BootstrapExpect == 0 && !c.Dev && c.Tokens.Operator == "" && c.Token == "" {
		errs = append(errs, errors.New("bootstrap_expect = 0 joins a running cluster, which needs the cluster's operator token: set server { operator_token = ... } (or -operator-token)"))
	}
	if (c.TLS.HTTP || c.TLS.RPC) && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		errs = append(errs, errors.New("tls: cert_file and key_file are required when http or rpc is on"))
	}
	if c.TLS.RPC && c.TLS.CAFile == "" {
		errs = append(errs, errors.New("tls: rpc (mutual TLS between raft peers) needs ca_file"))
	}
	// The files are read now, before anything touches data_dir: a bad path
	// must not leave a half-started server's raft state behind.
	if (c.TLS.HTTP || c.TLS.RPC) && c.TLS.CertFile != "" && c.TLS.KeyFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile); err != nil {
			errs = append(errs, fmt.Errorf("tls: cert_file %s, key_file %s: %w (want a PEM certificate and its private key)", c.TLS.CertFile, c.TLS.KeyFile, err))
		}
	}
	if (c.TLS.HTTP || c.TLS.RPC) && c.TLS.CAFile != "" {
		if _, err := loadCA(c.TLS.CAFile); err != nil {
			errs = append(errs, err)
		}
	}
	if ip := net.ParseIP(c.BindAddr); ip == nil {
		errs = append(errs, fmt.Errorf("bind_addr %q: want an IP address such as 127.0.0.1 or 0.0.0.0", c.BindAddr))
	} else if ip.IsUnspecified() && c.AdvertiseAddr == "" && c.RaftListener == nil {
		errs = append(errs, fmt.Errorf("bind_addr %s needs advertise_addr: the address peers use to reach this server", c.BindAddr))
	}
	return errors.Join(errs...)
}
