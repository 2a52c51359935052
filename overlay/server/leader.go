package server

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/raft"
)

// monitorLeadership starts the leader loop when this server gains
// leadership and cancels it when it loses it.
func (s *Server) monitorLeadership() {
	defer s.wg.Done()
	for {
		select {
		case <-s.shutdownCh:
			return
		case leader := <-s.notifyCh:
			if leader {
				s.startLeading()
			} else {
				s.stopLeading()
			}
		}
	}
}

func (s *Server) startLeading() {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	if s.leaderCancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.leaderCancel = cancel
	s.log.Info("gained leadership")
	s.wg.Add(1)
	go s.leaderLoop(ctx)
}

func (s *Server) stopLeading() {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	if s.leaderCancel != nil {
		s.log.Info("lost leadership")
		s.leaderCancel()
		s.leaderCancel = nil
	}
}

// leaderLoop waits until the FSM has applied everything committed before
// this term, registers this server's addresses, then reconciles every
// ReconcileInterval until leadership ends.
func (s *Server) leaderLoop(ctx context.Context) {
	defer s.wg.Done()
	for ctx.Err() == nil {
		if err := s.raft.Barrier(applyTimeout).Error(); err == nil {
			break
		} else if !s.pause(ctx, s.cfg.RetryInterval) {
			return
		}
	}
	s.checkClockAgainstState()
	for ctx.Err() == nil {
		if err := s.registerSelf(); err == nil {
			break
		} else if s.log.Warn("register server", "error", err); !s.pause(ctx, s.cfg.RetryInterval) {
			return
		}
	}
	if s.cfg.Reconciler == nil {
		return
	}
	var wake <-chan struct{} // nil: never receives
	if w, ok := s.cfg.Reconciler.(Waker); ok {
		wake = w.Wake()
	}
	for {
		if err := s.ReconcileOnce(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("reconcile", "error", err)
		}
		if !s.pauseOrWake(ctx, s.cfg.ReconcileInterval, wake) {
			return
		}
	}
}

// pause waits d; false when ctx ends or the server stops first.
func (s *Server) pause(ctx context.Context, d time.Duration) bool {
	return s.pauseOrWake(ctx, d, nil)
}

// pauseOrWake is pause cut short by a receive from wake.
func (s *Server) pauseOrWake(ctx context.Context, d time.Duration, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.shutdownCh:
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}

func (s *Server) registerSelf() error {
	me := state.Server{ID: s.id, RaftAddr: s.raftAddr, HTTPAddr: s.httpAddr}
	if cur := s.fsm.Read().Server(s.id); cur != nil && *cur == me {
		return nil
	}
	_, _, err := s.Apply(state.ServerUpsertType, state.ServerUpsertRequest{Server: me})
	return err
}

// ReconcileOnce runs one reconcile pass now and records it, with the
// charges and demand due up to the leader's clock, as one raft entry. It
// fails with ErrNotLeader on a follower.
func (s *Server) ReconcileOnce(ctx context.Context) error {
	s.passMu.Lock()
	defer s.passMu.Unlock()
	if !s.IsLeader() {
		return ErrNotLeader
	}
	start := time.Now()
	err := s.reconcile(ctx)
	result := "ok"
	if err != nil {
		result = "error"
	}
	s.metrics.reconciles.WithLabelValues(result).Inc()
	s.metrics.reconcileSeconds.Observe(time.Since(start).Seconds())
	return err
}

func (s *Server) reconcile(ctx context.Context) error {
	now := s.clock.Now()
	var out Outcome
	if s.cfg.Reconciler != nil {
		o, err := s.cfg.Reconciler.Reconcile(ctx, s.fsm.Read(), now)
		if err != nil {
			return fmt.Errorf("reconciler: %w", err)
		}
		out = o
	}
	return s.record(out, now)
}

// checkClockAgainstState compares, when this server starts leading, its
// clock with the newest time the replicated ledger holds. Behind it: this
// clock or a previous leader's is wrong (an error; charges for intervals
// already charged count once, so nothing is lost). Ahead by more than one
// entry may move the ledger: allot was down that long, or this clock is
// wrong (a warning; the ledger catches up MaxAdvance per entry, so a wrong
// clock noticed within minutes costs minutes of the oldest history, not all
// of it).
func (s *Server) checkClockAgainstState() {
	now := s.clock.Now()
	var head time.Time
	var ok bool
	s.fsm.WithLedger(func(l *budgets.Ledger) { head, ok = l.Head() })
	cfg := s.fsm.Config()
	switch {
	case !ok:
	case now.Add(cfg.MaxSkew).Before(head):
		s.log.Error("this server's clock is behind the replicated ledger: check NTP on every server",
			"clock", now.Format(time.RFC3339), "ledger_newest_bucket", head.Format(time.RFC3339), "behind", head.Sub(now).String())
	case now.After(head.Add(cfg.MaxAdvance)):
		s.log.Warn("this server's clock is far ahead of the replicated ledger: if allot was not down that long, the clock is wrong (check NTP); the ledger catches up one max_advance per entry",
			"clock", now.Format(time.RFC3339), "ledger_newest_bucket", head.Format(time.RFC3339), "ahead", now.Sub(head).String(), "max_advance", cfg.MaxAdvance.String())
	}
}

// record commits a pass as one entry: the Outcome's rows, the charges and
// demand due once they are in, its decisions, and the drain changes worked
// out from its observations. The FSM applies all of it or none.
func (s *Server) record(o Outcome, now time.Time) error {
	req, err := s.passRequest(o, now)
	if err != nil {
		return err
	}
	if req.Empty() {
		return nil
	}
	res, _, err := s.Apply(state.PassType, req)
	if err != nil {
		return fmt.Errorf("record the pass: %w", err)
	}
	if pr, ok := res.(state.PassResult); ok && pr.Notes != nil {
		// An interval cut at the ledger's step bound after an outage is
		// charged by the next passes; anything else is worth a look.
		s.log.Warn("pass charged in part", "gpu_seconds", pr.GPUSeconds, "notes", pr.Notes.Error())
	}
	return nil
}

// passRequest builds a pass's entry from its Outcome. Charges depend on the
// allocations the pass records (a new one is charged from its start, a
// stopped one up to its stop), and demand on its jobs: both are computed
// on the state as it will be once the pass's rows are in.
func (s *Server) passRequest(o Outcome, now time.Time) (state.PassRequest, error) {
	v := s.fsm.Read()
	req := state.PassRequest{At: now, Jobs: o.Jobs, DeletedJobs: o.DeletedJobs, Allocs: o.Allocs, Nodes: o.Nodes,
		Priorities: o.Priorities, ReplaceQueue: o.Queue != nil, Queue: o.Queue,
		ReplaceNotices: o.Notices != nil, Notices: o.Notices,
		Decisions: withStandings(o.Decisions, o.Queue, v)}
	drains, err := state.DrainChanges(v, o.Drains, now)
	if err != nil {
		return req, fmt.Errorf("drain observations: %w", err)
	}
	req.Drains = drains
	since := s.fsm.Config().LedgerWindow(now).From
	err = s.fsm.Preview(&req, func(pv *state.View) {
		req.Charges = state.ChargesDue(pv, now, since)
		req.Demand = state.DemandDue(pv, now, 3*s.cfg.ReconcileInterval)
	})
	if err != nil {
		return req, fmt.Errorf("the pass's rows: %w", err)
	}
	return req, nil
}

// joinLoop forms or joins the cluster through RetryJoin: with
// bootstrap_expect > 1 it bootstraps once it knows that many servers (all
// of them do the same with the same list); otherwise, and when others
// already run a cluster, it asks them to add this server.
func (s *Server) joinLoop() {
	defer s.wg.Done()
	log := s.log.Named("join")
	for {
		if s.clusterFormed() {
			return
		}
		err := s.tryJoin()
		if err == nil {
			return
		}
		if apiErr := (*client.APIError)(nil); errors.As(err, &apiErr) || errors.Is(err, errWrongCluster) {
			// A leader answered and refused: the operator has to act.
			log.Error("cannot join the cluster: an operator must act; retrying", "error", err)
		} else {
			log.Debug("retry join", "error", err)
		}
		if !s.pause(context.Background(), s.cfg.RetryInterval) {
			return
		}
	}
}

// errWrongCluster: retry_join leads to a cluster other than the one this
// server's data_dir belongs to.
var errWrongCluster = errors.New("join refused")

// clusterFormed reports whether this server is part of a configuration
// with a leader. Knowing a leader is not enough: a server that lost its
// data_dir and came back under a new ID at its old address hears the
// leader, which still replicates to the old ID there.
func (s *Server) clusterFormed() bool {
	addr, _ := s.raft.LeaderWithID()
	return addr != "" && s.inConfiguration()
}

// inConfiguration reports whether this server's ID is in its latest raft
// configuration.
func (s *Server) inConfiguration() bool {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, srv := range f.Configuration().Servers {
		if srv.ID == raft.ServerID(s.id) {
			return true
		}
	}
	return false
}

func (s *Server) tryJoin() error {
	if s.inConfiguration() {
		return nil // restarted member: raft finds its peers in its own log
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RetryInterval+5*time.Second)
	defer cancel()
	peers := map[string]client.Self{}
	var errs []error
	for _, addr := range s.cfg.RetryJoin {
		c, err := s.peerClient(addr)
		if err != nil {
			return err
		}
		self, err := c.Self(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if self.ID != s.id {
			peers[self.ID] = *self
		}
	}
	for _, p := range peers {
		if mine := s.ClusterID(); p.Leader != "" && mine != "" && p.ClusterID != "" && p.ClusterID != mine {
			return fmt.Errorf("%w: this server's data_dir belongs to cluster %s but the servers at retry_join (%s) form cluster %s; "+
				"point retry_join at this server's own cluster, or move data_dir aside to join the other one empty",
				errWrongCluster, mine, p.HTTPAddr, p.ClusterID)
		}
		if p.Leader != "" {
			c, _ := s.peerClient(p.HTTPAddr)
			if err := c.Join(ctx, &client.JoinRequest{ID: s.id, RaftAddr: s.raftAddr}); err != nil {
				return err
			}
			return s.disk.record(0, p.ClusterID)
		}
	}
	if s.cfg.BootstrapExpect > 1 && len(peers)+1 >= s.cfg.BootstrapExpect {
		servers := []raft.Server{{ID: raft.ServerID(s.id), Address: raft.ServerAddress(s.raftAddr)}}
		for _, p := range peers {
			servers = append(servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.RaftAddr)})
		}
		sort.Slice(servers, func(i, j int) bool { return servers[i].ID < servers[j].ID })
		return s.bootstrapExpected(servers)
	}
	return fmt.Errorf("found %d of %d servers: %w", len(peers)+1, s.cfg.BootstrapExpect, errors.Join(errs...))
}

func (s *Server) bootstrapExpected(servers []raft.Server) error {
	err := s.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		return err
	}
	s.log.Info("bootstrapped cluster", "servers", len(servers))
	return s.disk.record(s.raft.LastIndex(), clusterIDOf(servers)) // the bootstrap entry is on disk now
}

func (s *Server) peerClient(addr string) (*client.Client, error) {
	scheme := "http://"
	if s.cfg.TLS.HTTP {
		scheme = "https://"
	}
	// Joining is an operator action (the operator token also reads); a
	// bootstrap_expect group only reads its peers' /v1/agent/self.
	token := s.cfg.Tokens.Operator
	for _, t := range []string{s.cfg.Token, s.cfg.Tokens.Read} {
		if token == "" {
			token = t
		}
	}
	c, err := client.New(scheme+addr, token, s.fwdTLS)
	if err != nil {
		return nil, fmt.Errorf("retry_join %q: %w", addr, err)
	}
	return c, nil
}
