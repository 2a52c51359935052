package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/hashicorp/raft"
)

func (s *Server) getBudgets(_ *http.Request, v *state.View) (any, error) {
	out := client.Budgets{Budgets: []client.Budget{}}
	b := v.Budgets()
	if b == nil {
		return out, nil
	}
	out.Revision, out.Digests, out.AppliedAt = b.Revision, b.Digests, b.AppliedAt
	for _, n := range b.Tree().Nodes() {
		out.Budgets = append(out.Budgets, client.Budget{Path: n.Path, Share: n.Share, Normalized: n.Normalized,
			Effective: n.Effective, Leaf: n.IsLeaf(), Description: n.Description, Owners: n.Owners})
	}
	return out, nil
}

func (s *Server) putBudgets(_ *http.Request, body []byte) (any, error) {
	var in client.BudgetsApply
	if err := decodeBody(body, &in); err != nil {
		return nil, err
	}
	if strings.TrimSpace(in.Revision) == "" {
		return nil, errorf(http.StatusBadRequest, "revision is required: the git commit (or content digest) the budget files came from")
	}
	specs := make([]budgets.Spec, len(in.Budgets))
	for i, b := range in.Budgets {
		specs[i] = budgets.Spec{Path: b.Path, Share: b.Share, Description: b.Description, Owners: b.Owners}
	}
	req := state.BudgetsApplyRequest{Revision: in.Revision, Digests: in.Digests, Specs: specs, AppliedAt: s.clock.Now()}
	if err := state.CheckBudgetsApply(&req); err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	if _, err := budgets.NewTree(specs); err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	_, idx, err := s.Apply(state.BudgetsApplyType, req)
	if err != nil {
		return nil, err
	}
	return client.WriteResult{Index: idx}, nil
}

func queueJob(q *state.QueueEntry) client.QueueJob {
	out := client.QueueJob{JobID: q.JobID, Budget: q.Leaf, Band: q.Band, Priority: q.Priority,
		SortMetric: client.Ratio(q.SortMetric), Position: q.Position, Explanation: q.Explanation,
		ProtectedUntil: q.ProtectedUntil, FreeAt: q.FreeAt}
	if st := q.Standing; st != nil {
		out.Standing = &client.Standing{Metric: st.Metric, LeafPosition: st.LeafPosition,
			ServedRatio: st.ServedRatio, UsageShare: st.UsageShare, Effective: st.Effective,
			Parts: make([]client.LevelPart, len(st.Parts))}
		for i, p := range st.Parts {
			out.Standing.Parts[i] = client.LevelPart{Path: p.Path, Share: p.Share,
				UsageFraction: p.UsageFraction, Level: p.Level}
		}
	}
	return out
}

func (s *Server) getQueue(_ *http.Request, v *state.View) (any, error) {
	out := client.Queue{Jobs: []client.QueueJob{}}
	for _, q := range v.Queue() {
		out.PlannedAt = q.PlannedAt
		out.Jobs = append(out.Jobs, queueJob(q))
	}
	return out, nil
}

func (s *Server) getExplain(r *http.Request, v *state.View) (any, error) {
	id := r.PathValue("id")
	if err := state.CheckSize("job ID", id, state.MaxIDBytes); err != nil {
		return nil, errorf(http.StatusBadRequest, "%v", err)
	}
	j := v.Job(id)
	if j == nil && !strings.Contains(id, "/") {
		id = "default/" + id
		j = v.Job(id)
	}
	if j == nil {
		return nil, errorf(http.StatusNotFound, "job %q is not managed by allot%s: it is unknown, in another namespace, or asks for no GPUs (IDs are namespace/name)",
			r.PathValue("id"), nearestJob(v, id))
	}
	out := client.Explain{JobID: j.ID, Budget: j.Contract.Budget, MinRuntime: j.Contract.MinRuntime, GPUs: j.GPUs,
		Unallocated: j.Contract.Reason, Allocs: []client.Alloc{}, Decisions: []client.Decision{}}
	if q := v.QueueEntry(id); q != nil {
		qj := queueJob(q)
		out.Queue = &qj
	}
	if p := v.Priority(id); p != nil {
		out.Priority = &p.Priority
	}
	for _, a := range v.JobAllocs(id) {
		out.Allocs = append(out.Allocs, client.Alloc{ID: a.ID, NodeID: a.NodeID, GPUs: a.GPUs, StartedAt: a.StartedAt,
			ProtectedUntil: a.ProtectedUntil, StoppedAt: a.StoppedAt, Preemptions: a.Preemptions, ChargedGPUSeconds: a.ChargedGPUSeconds})
	}
	for _, d := range v.Decisions(0) {
		if d.JobID == id {
			out.Decisions = append(out.Decisions, decision(d))
		}
	}
	return out, nil
}

// nearestJob returns ` (did you mean "ns/x"?)` for the managed job whose ID
// is closest in spelling to id (budgets.Nearest), "" when none is close.
func nearestJob(v *state.View, id string) string {
	jobs := v.Jobs()
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	if near := budgets.Nearest(id, ids); near != "" {
		return fmt.Sprintf(" (did you mean %q?)", near)
	}
	return ""
}

func decision(d *state.Decision) client.Decision {
	return client.Decision{Seq: d.Seq, At: d.At, Kind: d.Kind, JobID: d.JobID, AllocID: d.AllocID, NodeID: d.NodeID, Reason: d.Reason}
}

// maxSinceDays keeps a look-back in days within a time.Duration.
const maxSinceDays = math.MaxInt64 / int64(24*time.Hour)

// ParseSince parses a look-back like "7d", "36h" or "90m".
func ParseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err == nil && n > 0 && n <= maxSinceDays {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	} else if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d, nil
	}
	return 0, fmt.Errorf("since %s: want a positive duration such as 7d, 36h or 90m", state.QuotePrefix(s))
}

func (s *Server) getUsage(r *http.Request, v *state.View) (any, error) {
	since := 7 * 24 * time.Hour
	if q := r.URL.Query().Get("since"); q != "" {
		d, err := ParseSince(q)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "%v", err)
		}
		since = d
	}
	if max := s.fsm.Config().Retention; since > max {
		return nil, errorf(http.StatusBadRequest, "since %v reaches beyond the ledger's %v of history: want at most %v", since, max, max)
	}
	to := s.clock.Now().Truncate(time.Second)
	out := client.Usage{From: to.Add(-since), To: to, Budgets: []client.UsageRow{}}
	for _, n := range v.Nodes() {
		out.CapacityGPUs += n.TotalGPUs
	}
	b := v.Budgets()
	if b == nil {
		return out, nil
	}
	tree := b.Tree()
	var report []budgets.Delivery
	demand := make([]int64, tree.Len())
	s.fsm.WithLedger(func(l *budgets.Ledger) {
		report = budgets.OwedReport(tree, l, out.CapacityGPUs, out.From, out.To)
		for _, leaf := range tree.Leaves() {
			demand[leaf.Index] = l.Demand(leaf.Path, out.From, out.To)
		}
	})
	nodes := tree.Nodes()
	for i := len(nodes) - 1; i > 0; i-- {
		demand[nodes[i].Parent.Index] += demand[i]
	}
	hours := func(gs int64) float64 { return float64(gs) / 3600 }
	for i, d := range report {
		out.Budgets = append(out.Budgets, client.UsageRow{Path: d.Path, Leaf: nodes[i].IsLeaf(), Charged: hours(d.Delivered),
			Demand: hours(demand[i]), Owed: hours(d.Owed), Ratio: client.Ratio(d.Ratio),
			Credited: hours(d.Credited), CreditedRatio: client.Ratio(d.CreditedRatio)})
	}
	return out, nil
}

func (s *Server) getNodes(_ *http.Request, v *state.View) (any, error) {
	out := client.Nodes{Nodes: []client.Node{}}
	running := runningByNode(v)
	for _, n := range v.Nodes() {
		cn := client.Node{ID: n.ID, Name: n.Name, Drain: n.Drain.String(), Reason: n.Reason, Since: n.Since,
			TotalGPUs: n.TotalGPUs, HealthyGPUs: n.HealthyGPUs, GPUs: []client.NodeGPU{}, Lifecycle: lifecycle(v.Drain(n.ID)),
			Running: append([]client.NodeAlloc{}, running[n.ID]...)}
		for _, g := range n.GPUs {
			cn.GPUs = append(cn.GPUs, client.NodeGPU{ID: g.ID, Model: g.Model, Healthy: g.Healthy, Reason: g.Reason})
		}
		if n.Drain == policy.NodeReserved {
			// A reservation is not a drain: the node is in service, held.
			cn.Drain = policy.NodeNormal.String()
			cn.Reservation = &client.NodeReservation{Job: n.ReservedFor, Since: n.Since, Until: n.ReservedUntil}
		}
		out.Nodes = append(out.Nodes, cn)
	}
	return out, nil
}

func (s *Server) getDecisions(r *http.Request, v *state.View) (any, error) {
	limit := 100
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n <= 0 || n > MaxDecisionsPage {
			return nil, errorf(http.StatusBadRequest, "limit %s: want 1 to %d (decisions per page)", state.QuotePrefix(q), MaxDecisionsPage)
		}
		limit = n
	}
	out := client.Decisions{Decisions: []client.Decision{}}
	for _, d := range filterDecisions(r, v, limit) {
		out.Decisions = append(out.Decisions, decision(d))
	}
	return out, nil
}

func (s *Server) postLedger(_ *http.Request, body []byte) (any, error) {
	var in client.LedgerAppend
	if err := decodeBody(body, &in); err != nil {
		return nil, err
	}
	if len(in.Charges) == 0 && len(in.Demand) == 0 {
		return nil, errorf(http.StatusBadRequest, "nothing to append: give charges and/or demand")
	}
	now := s.clock.Now()
	if err := s.checkLedger(s.fsm.Read(), &in, now); err != nil {
		return nil, err
	}
	var out client.LedgerResult
	if len(in.Charges) > 0 {
		req := state.ChargeRequest{Charges: make([]state.Charge, len(in.Charges)), Now: now}
		for i, c := range in.Charges {
			req.Charges[i] = state.Charge{Alloc: c.Alloc, Leaf: c.Budget, GPUs: c.GPUs, From: c.From, To: c.To}
		}
		res, idx, err := s.Apply(state.ChargeType, req)
		if err != nil {
			return nil, err
		}
		out.Index = idx
		addResult(&out, res.(state.ChargeResult), &out.ChargedGPUSeconds)
	}
	if len(in.Demand) > 0 {
		req := state.DemandRequest{Samples: make([]state.DemandSample, len(in.Demand)), Now: now}
		for i, d := range in.Demand {
			req.Samples[i] = state.DemandSample{Leaf: d.Budget, GPUs: d.GPUs, From: d.From, To: d.To}
		}
		res, idx, err := s.Apply(state.DemandType, req)
		if err != nil {
			return nil, err
		}
		out.Index = idx
		addResult(&out, res.(state.ChargeResult), &out.DemandGPUSeconds)
	}
	return out, nil
}

// checkLedger refuses a ledger append with any item out of bounds, before
// anything reaches raft: the error names each bad field (the first ten)
// and its valid range. Times must lie in the ledger's window around the
// leader's clock; a charge's GPUs within the cluster's (every GPU the nodes
// report, or state.MaxGPUs while no node is known), demand's within
// state.MaxGPUs (pending work may want more than the cluster has).
func (s *Server) checkLedger(v *state.View, in *client.LedgerAppend, now time.Time) error {
	window := s.fsm.Config().LedgerWindow(now)
	capacity := 0
	for _, n := range v.Nodes() {
		capacity += n.TotalGPUs
	}
	maxGPUs := state.MaxGPUs
	if capacity > 0 {
		maxGPUs = min(capacity, maxGPUs)
	}
	var errs []error
	add := func(err error) {
		if err != nil && len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	for i, c := range in.Charges {
		f := fmt.Sprintf("charges[%d]", i)
		if c.Alloc == "" {
			add(fmt.Errorf("%s.alloc is required: the allocation charged", f))
		}
		add(state.CheckSize(f+".alloc", c.Alloc, state.MaxIDBytes))
		add(state.CheckSize(f+".budget", c.Budget, state.MaxPathBytes))
		if err := state.CheckGPUs(f+".gpus", c.GPUs, maxGPUs); err != nil && capacity > 0 {
			add(fmt.Errorf("%w (the cluster has %d GPUs)", err, capacity))
		} else {
			add(err)
		}
		add(window.CheckInterval(f, c.From, c.To))
	}
	for i, d := range in.Demand {
		f := fmt.Sprintf("demand[%d]", i)
		if d.Budget == "" {
			add(fmt.Errorf("%s.budget is required", f))
		}
		add(state.CheckSize(f+".budget", d.Budget, state.MaxPathBytes))
		add(state.CheckGPUs(f+".gpus", d.GPUs, state.MaxGPUs))
		add(window.CheckInterval(f, d.From, d.To))
	}
	if len(errs) > 0 {
		return errorf(http.StatusBadRequest, "%v", errors.Join(errs...))
	}
	return nil
}

func (s *Server) getPeers(_ *http.Request, v *state.View) (any, error) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	_, leader := s.raft.LeaderWithID()
	out := client.Peers{Servers: []client.Peer{}}
	for _, srv := range f.Configuration().Servers {
		p := client.Peer{ID: string(srv.ID), RaftAddr: string(srv.Address), Leader: srv.ID == leader, Voter: srv.Suffrage == raft.Voter}
		if reg := v.Server(string(srv.ID)); reg != nil {
			p.HTTPAddr = reg.HTTPAddr
		}
		if srv.ID == raft.ServerID(s.id) {
			p.HTTPAddr = s.httpAddr
		}
		out.Servers = append(out.Servers, p)
	}
	return out, nil
}

func (s *Server) putJoin(_ *http.Request, body []byte) (any, error) {
	var in client.JoinRequest
	if err := decodeBody(body, &in); err != nil {
		return nil, err
	}
	if in.ID == "" || in.RaftAddr == "" {
		return nil, errorf(http.StatusBadRequest, "join needs id and raft_addr")
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	for _, srv := range f.Configuration().Servers {
		if srv.Address == raft.ServerAddress(in.RaftAddr) && srv.ID != raft.ServerID(in.ID) {
			s.log.Warn("join refused: the address belongs to another server (did it lose its data_dir?)",
				"joining", in.ID, "raft", in.RaftAddr, "configured", srv.ID)
			return nil, errorf(http.StatusConflict, "raft address %s already belongs to server %s in the cluster's configuration; "+
				"a server that lost its data_dir comes back with a new ID (%s): remove the old one first "+
				"(allot operator raft remove-peer -id %s), and the new one joins at its next attempt; "+
				"or set node_id = %q on it to keep its ID", in.RaftAddr, srv.ID, in.ID, srv.ID, srv.ID)
		}
	}
	if err := s.verifyPeerCertificate(in.RaftAddr); err != nil {
		return nil, err
	}
	af := s.raft.AddVoter(raft.ServerID(in.ID), raft.ServerAddress(in.RaftAddr), 0, applyTimeout)
	if err := af.Error(); err != nil {
		return nil, fmt.Errorf("%w: add voter: %v", ErrNotLeader, err)
	}
	s.log.Info("server joined", "id", in.ID, "raft", in.RaftAddr)
	return client.WriteResult{Index: af.Index()}, nil
}

// verifyPeerCertificate dials a joining server's raft address with raft's
// mutual TLS and completes a handshake, so that a server whose certificate
// does not chain to the cluster's CA is refused before it becomes a voter
// that can never vote (its raft connections would all fail).
func (s *Server) verifyPeerCertificate(addr string) error {
	if s.raftTLS == nil {
		return nil
	}
	d := &net.Dialer{Timeout: 5 * time.Second}
	conf := s.raftTLS.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil && conf.ServerName == "" {
		conf.ServerName = host
	}
	conn, err := tls.DialWithDialer(d, "tcp", addr, conf)
	if err != nil {
		return errorf(http.StatusForbidden, "join refused: the raft TLS handshake with %s failed: %v; the joining server must present a certificate "+
			"issued by this cluster's CA (tls { ca_file }) for its address, and trust the same CA", addr, err)
	}
	return conn.Close()
}

func (s *Server) deletePeer(r *http.Request, _ []byte) (any, error) {
	id := r.URL.Query().Get("id")
	if id == "" {
		return nil, errorf(http.StatusBadRequest, "remove-peer needs ?id=SERVER_ID (see allot operator raft list-peers)")
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	var ids []string
	found := false
	for _, srv := range f.Configuration().Servers {
		ids = append(ids, string(srv.ID))
		found = found || srv.ID == raft.ServerID(id)
	}
	if !found {
		return nil, errorf(http.StatusNotFound, "no server %q in the raft configuration; its servers are %s", id, strings.Join(ids, ", "))
	}
	rf := s.raft.RemoveServer(raft.ServerID(id), 0, applyTimeout)
	if err := rf.Error(); err != nil {
		return nil, fmt.Errorf("%w: remove server: %v", ErrNotLeader, err)
	}
	s.log.Info("server removed from the raft configuration", "id", id)
	return client.WriteResult{Index: rf.Index()}, nil
}

func (s *Server) getSelf(_ *http.Request, _ *state.View) (any, error) {
	_, leader := s.raft.LeaderWithID()
	return client.Self{ID: s.id, RaftAddr: s.raftAddr, HTTPAddr: s.httpAddr, Leader: string(leader), ClusterID: s.ClusterID()}, nil
}

// addResult folds one entry's ChargeResult into the answer.
func addResult(out *client.LedgerResult, r state.ChargeResult, total *int64) {
	*total += r.GPUSeconds
	out.Skipped += r.Skipped
	if r.Err != nil {
		out.Errors = append(out.Errors, strings.Split(r.Err.Error(), "\n")...)
	}
}
