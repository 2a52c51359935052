package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Errors callers branch on.
var (
	// ErrNotLeader: the write must go to the leader.
	ErrNotLeader = errors.New("not the raft leader")
	// ErrNoLeader: no leader is known right now; retry later.
	ErrNoLeader = errors.New("no raft leader known")
	// ErrRejected: the state machine refused the entry (invalid input).
	ErrRejected = errors.New("rejected by the state machine")
)

// applyTimeout bounds how long a write waits to be enqueued to raft.
const applyTimeout = 10 * time.Second

// Server is one running allot server.
type Server struct {
	cfg      Config
	log      hclog.Logger
	id       string
	fsm      *state.FSM
	raft     *raft.Raft
	trans    raft.Transport
	closers  []func() error
	raftAddr string
	httpAddr string
	httpLn   net.Listener
	httpSrv  *http.Server
	fwd      *http.Client
	fwdTLS   *tls.Config
	raftTLS  *tls.Config // raft's mutual TLS, client side (nil without tls.rpc)
	metrics  *metrics
	paths    []string // HTTP paths served, for 405 answers
	clock    *leaderClock
	reads    chan struct{} // one token per read being served: MaxConcurrentReads

	disk       *diskStore // nil with Dev
	failCh     chan error // receives the store failure that stopped the server
	failOnce   sync.Once
	failed     atomic.Bool
	notifyCh   chan bool
	shutdownCh chan struct{}
	wg         sync.WaitGroup

	passMu       sync.Mutex // one reconcile pass at a time
	leaderMu     sync.Mutex
	leaderCancel context.CancelFunc
	shutdownOnce sync.Once
}

// New starts a server: raft, the HTTP API and, when this server leads, the
// reconcile loop. Call Shutdown to stop it.
func New(cfg Config) (*Server, error) {
	c := cfg.withDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: c, log: c.Logger.Named("server"), notifyCh: make(chan bool, 16), shutdownCh: make(chan struct{}),
		reads: make(chan struct{}, c.MaxConcurrentReads), failCh: make(chan error, 1)}
	s.clock = newLeaderClock(&cfg, s.log.Named("clock"))
	ok := false
	defer func() {
		if !ok {
			s.closeAll()
		}
	}()
	var err error
	if s.fsm, err = state.NewFSM(c.FSM); err != nil {
		return nil, err
	}
	if err := s.openState(); err != nil {
		return nil, err
	}
	if err := s.setupForwarding(); err != nil {
		return nil, err
	}
	if err := s.listenHTTP(); err != nil {
		return nil, err
	}
	if err := s.setupRaft(); err != nil {
		return nil, err
	}
	s.metrics = newMetrics(s)
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go s.monitorLeadership()
	if !c.Dev && c.BootstrapExpect != 1 {
		s.wg.Add(1)
		go s.joinLoop()
	}
	ok = true
	s.log.Info("server started", "id", s.id, "http", s.httpAddr, "raft", s.raftAddr, "dev", c.Dev)
	return s, nil
}

// openState picks the server's ID and, unless Dev, opens and checks the
// raft state in data_dir (store.go), refusing a damaged one.
func (s *Server) openState() error {
	if s.cfg.Dev {
		s.id = s.cfg.NodeID
		if s.id == "" {
			var err error
			s.id, err = randomID()
			return err
		}
		return nil
	}
	disk, err := openDiskStore(s.cfg.DataDir, s.cfg.NodeID, s.cfg.Logger, s.storeFailed)
	if err != nil {
		return err
	}
	s.disk, s.id = disk, disk.identity.ServerID
	s.closers = append(s.closers, disk.bolt.Close, func() error {
		return s.recordIdentity() // runs after raft has stopped, before the store closes
	})
	return nil
}

// storeFailed stops the server after a write its raft store could not make.
func (s *Server) storeFailed(err error) {
	s.failOnce.Do(func() {
		err = fmt.Errorf("%w; the disk under data_dir %s may be read-only, full or failing: this server stopped (its peers keep serving); fix the disk and start it again",
			err, s.cfg.DataDir)
		s.failed.Store(true)
		s.log.Error("raft store failed: stopping the server", "error", err)
		s.failCh <- err
		go s.Shutdown()
	})
}

// Failed receives the error of a raft store failure that stopped the
// server (a disk turned read-only or full). Nothing is sent otherwise.
func (s *Server) Failed() <-chan error { return s.failCh }

// recordIdentity writes the applied index (and the cluster ID) to the
// identity file.
func (s *Server) recordIdentity() error {
	if s.disk == nil || s.raft == nil {
		return nil
	}
	return s.disk.record(s.raft.AppliedIndex(), "")
}

// identityLoop records the applied index every few seconds, so that a
// raft.db that later loses entries is refused (store.go).
func (s *Server) identityLoop() {
	defer s.wg.Done()
	t := time.NewTicker(identityInterval)
	defer t.Stop()
	for {
		select {
		case <-s.shutdownCh:
			return
		case <-t.C:
			if err := s.recordIdentity(); err != nil {
				s.log.Warn("record identity", "error", err)
			}
		}
	}
}

// identityInterval: how often the applied index reaches the identity
// file. A raft.db that loses entries applied within the last interval
// before a crash is not detected by the index check (the checksums still
// catch altered entries).
const identityInterval = 2 * time.Second

// clusterIDOf names a cluster by its bootstrap configuration: every server
// of a bootstrap_expect group bootstraps with the same one, so they agree.
func clusterIDOf(servers []raft.Server) string {
	h := sha256.New()
	for _, srv := range servers {
		fmt.Fprintf(h, "%s\x00%s\x00", srv.ID, srv.Address)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// ClusterID returns the cluster's ID as this server knows it (empty with
// Dev, or before it has bootstrapped or joined).
func (s *Server) ClusterID() string {
	if s.disk == nil {
		return ""
	}
	return s.disk.ident().ClusterID
}

func randomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
}

func (s *Server) advertiseHost() string {
	if s.cfg.AdvertiseAddr != "" {
		return s.cfg.AdvertiseAddr
	}
	return s.cfg.BindAddr
}

func (s *Server) listenHTTP() error {
	ln := s.cfg.HTTPListener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(s.cfg.BindAddr, strconv.Itoa(s.cfg.HTTPPort)))
		if err != nil {
			return fmt.Errorf("http listener: %w (choose another ports.http)", err)
		}
	}
	s.httpLn = ln
	s.closers = append(s.closers, func() error { return ignoreClosed(ln.Close()) })
	port := ln.Addr().(*net.TCPAddr).Port
	s.httpAddr = net.JoinHostPort(s.advertiseHost(), strconv.Itoa(port))
	return nil
}

func ignoreClosed(err error) error {
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// setupRaft opens the stores and transport and starts raft, bootstrapping
// when this server may.
// DevRaftAddr is the raft address of a -dev server: its transport is in
// memory and no peer can dial it (the node ID used to stand here, and was
// printed as if it were an address).
const DevRaftAddr = "in-memory"

func (s *Server) setupRaft() error {
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(s.id)
	rc.Logger = s.cfg.Logger.Named("raft")
	rc.NotifyCh = s.notifyCh
	if s.cfg.Dev {
		// One in-memory server: nobody to wait for, so elect at once.
		rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	}
	tune(rc, s.cfg.Raft)

	var logs raft.LogStore
	var stable raft.StableStore
	var snaps raft.SnapshotStore
	if s.cfg.Dev {
		store := raft.NewInmemStore()
		logs, stable, snaps = store, store, raft.NewInmemSnapshotStore()
		addr, trans := raft.NewInmemTransport(DevRaftAddr)
		s.raftAddr, s.trans = string(addr), trans
	} else {
		logs, stable, snaps = s.disk.logs, s.disk.stable, s.disk.snaps
		if err := s.setupTransport(); err != nil {
			return err
		}
	}
	if !s.cfg.Dev {
		if err := s.recoverFromPeersFile(rc, logs, stable, snaps); err != nil {
			return err
		}
	}
	r, err := raft.NewRaft(rc, s.fsm, logs, stable, snaps, s.trans)
	if err != nil {
		if s.cfg.Dev {
			return fmt.Errorf("start raft: %w", err)
		}
		return fmt.Errorf("start raft on data_dir %s: %w; if its state is damaged, %s", s.cfg.DataDir, err, recoverHint)
	}
	s.raft = r
	s.closers = append(s.closers, func() error { return r.Shutdown().Error() })
	if s.disk != nil {
		// Runs before raft's shutdown: after a store failure the raft
		// goroutine waits in the stable store (checked_store.go) until the
		// transport is closed, so that the unsaved term never goes out.
		s.closers = append(s.closers, func() error {
			var err error
			if s.failed.Load() {
				err = s.trans.(io.Closer).Close()
			}
			s.disk.fail.stop()
			return err
		})
		s.wg.Add(1)
		go s.identityLoop()
	}
	if s.cfg.Dev || s.cfg.BootstrapExpect == 1 {
		return s.bootstrap([]raft.Server{{ID: rc.LocalID, Address: raft.ServerAddress(s.raftAddr)}}, logs, stable, snaps)
	}
	return nil
}

func tune(rc *raft.Config, t RaftTuning) {
	set := func(dst *time.Duration, v time.Duration) {
		if v > 0 {
			*dst = v
		}
	}
	set(&rc.HeartbeatTimeout, t.HeartbeatTimeout)
	set(&rc.ElectionTimeout, t.ElectionTimeout)
	set(&rc.LeaderLeaseTimeout, t.LeaderLeaseTimeout)
	set(&rc.CommitTimeout, t.CommitTimeout)
	set(&rc.SnapshotInterval, t.SnapshotInterval)
	if t.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = t.SnapshotThreshold
	}
	if t.TrailingLogs > 0 {
		rc.TrailingLogs = t.TrailingLogs
	}
}

// bootstrap starts a new cluster with servers unless this server already
// has raft state. Every server of a bootstrap_expect group bootstraps with
// the same configuration, which raft accepts.
func (s *Server) bootstrap(servers []raft.Server, logs raft.LogStore, stable raft.StableStore, snaps raft.SnapshotStore) error {
	if !s.cfg.Dev {
		has, err := raft.HasExistingState(logs, stable, snaps)
		if err != nil {
			return fmt.Errorf("read raft state: %w", err)
		}
		if has {
			return nil
		}
	}
	err := s.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return fmt.Errorf("bootstrap: %w", err)
	}
	s.log.Info("bootstrapped cluster", "servers", len(servers))
	if s.disk != nil {
		return s.disk.record(s.raft.LastIndex(), clusterIDOf(servers)) // the bootstrap entry is on disk now
	}
	return nil
}

func (s *Server) closeAll() {
	for i := len(s.closers) - 1; i >= 0; i-- {
		if err := s.closers[i](); err != nil {
			s.log.Warn("close", "error", err)
		}
	}
	s.closers = nil
}

// Shutdown stops the HTTP API, the leader loop and raft, and closes the
// stores. Raft state on disk is kept.
func (s *Server) Shutdown() error {
	s.shutdownOnce.Do(func() {
		close(s.shutdownCh)
		if s.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.httpSrv.Shutdown(ctx)
			cancel()
		}
		s.stopLeading()
		s.closeAll()
		s.wg.Wait()
	})
	return nil
}

// ID returns the server's raft ID.
func (s *Server) ID() string { return s.id }

// HTTPAddr returns host:port of the HTTP API.
func (s *Server) HTTPAddr() string { return s.httpAddr }

// RaftAddr returns the raft address peers dial.
func (s *Server) RaftAddr() string { return s.raftAddr }

// FSM returns the replicated state, for reads.
func (s *Server) FSM() *state.FSM { return s.fsm }

// Raft returns the raft instance, for tests and operator tooling.
func (s *Server) Raft() *raft.Raft { return s.raft }

// IsLeader reports whether this server leads.
func (s *Server) IsLeader() bool { return s.raft.State() == raft.Leader }

// Apply commits one entry through raft; on a follower it fails with
// ErrNotLeader. An entry the FSM refuses comes back wrapped in ErrRejected;
// the FSM's response (such as a state.ChargeResult) is returned otherwise.
func (s *Server) Apply(t state.MessageType, req any) (any, uint64, error) {
	data, err := state.Encode(t, req)
	if err != nil {
		return nil, 0, err
	}
	f := s.raft.Apply(data, applyTimeout)
	if err := f.Error(); err != nil {
		s.metrics.writes.WithLabelValues(t.String(), "raft_error").Inc()
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) {
			return nil, 0, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		return nil, 0, err
	}
	resp := f.Response()
	if e, ok := resp.(error); ok {
		s.metrics.writes.WithLabelValues(t.String(), "rejected").Inc()
		return nil, f.Index(), fmt.Errorf("%w: %v", ErrRejected, e)
	}
	s.metrics.writes.WithLabelValues(t.String(), "ok").Inc()
	return resp, f.Index(), nil
}

// leaderHTTP returns the leader's HTTP address, as it registered itself.
func (s *Server) leaderHTTP() (string, error) {
	_, id := s.raft.LeaderWithID()
	if id == "" {
		return "", ErrNoLeader
	}
	srv := s.fsm.Read().Server(string(id))
	if srv == nil || srv.HTTPAddr == "" {
		return "", fmt.Errorf("%w: leader %s has not registered its HTTP address yet", ErrNoLeader, id)
	}
	return srv.HTTPAddr, nil
}
