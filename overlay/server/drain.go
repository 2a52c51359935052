package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
	"github.com/prometheus/client_golang/prometheus"
)

// lifecycle is a node's drain lifecycle as the API shows it.
func lifecycle(r *state.DrainRecord) client.NodeDrain {
	if r == nil {
		return client.NodeDrain{Phase: policy.NodeNormal.Phase()}
	}
	out := client.NodeDrain{Phase: r.Phase.Phase(), Cause: r.Cause, Reason: r.Reason, Episode: r.Episode,
		PhaseSince: r.PhaseSince, StartedAt: r.StartedAt, DrainedAt: r.DrainedAt, ReturnedAt: r.ReturnedAt,
		ReturnedBy: r.ReturnedBy, Deadline: r.Deadline, Manual: r.Manual, Requeued: len(r.Requeued),
		GPUHoursLost: float64(r.GPUSecondsLost) / 3600, ReturnRequested: r.ReturnRequested}
	if r.Phase == policy.NodeCordoned || r.Phase == policy.NodeDraining {
		for _, a := range r.Allocs {
			out.Allocs = append(out.Allocs, client.DrainAlloc{ID: a.ID, JobID: a.JobID, GPUs: a.GPUs, LeavesAt: a.LeavesAt})
		}
	}
	return out
}

// findNode resolves an operator's node argument: a node ID, a unique
// prefix of one, or a node name, among the GPU nodes allot knows.
func findNode(v *state.View, arg string) (*state.Node, error) {
	var matches []*state.Node
	for _, n := range v.Nodes() {
		if n.ID == arg {
			return n, nil
		}
		if n.Name == arg || (len(arg) >= 4 && strings.HasPrefix(n.ID, arg)) {
			matches = append(matches, n)
		}
	}
	switch len(matches) {
	case 0:
		return nil, errorf(http.StatusNotFound, "no GPU node %s: give a node ID, a unique ID prefix (4+ characters) or a node name from `allot nodes`", state.QuotePrefix(arg))
	case 1:
		return matches[0], nil
	}
	var ids []string
	for _, n := range matches {
		ids = append(ids, n.ID)
	}
	return nil, errorf(http.StatusConflict, "node %s is ambiguous: it matches %s; give the full node ID", state.QuotePrefix(arg), strings.Join(ids, ", "))
}

// putNodeReturn asks for a drained node's return to service. The next
// reconcile pass marks it eligible once its GPUs are healthy.
func (s *Server) putNodeReturn(r *http.Request, _ []byte) (any, error) {
	v := s.fsm.Read()
	n, err := findNode(v, r.PathValue("id"))
	if err != nil {
		return nil, err
	}
	rec := v.Drain(n.ID)
	if rec == nil || !rec.Active() {
		phase := policy.NodeNormal
		if rec != nil {
			phase = rec.Phase
		}
		return nil, errorf(http.StatusConflict, "node %s is %s: only a cordoned, draining or drained node can be returned", n.ID, phase.Phase())
	}
	_, idx, err := s.Apply(state.DrainReturnType, state.DrainReturnRequest{NodeID: n.ID, At: s.clock.Now()})
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("node %s (%s) returns to service at the next reconcile pass", n.ID, rec.Phase.Phase())
	if n.HealthyGPUs < n.TotalGPUs {
		msg = fmt.Sprintf("node %s reports %d of %d GPUs healthy: it returns to service as soon as all are healthy", n.ID, n.HealthyGPUs, n.TotalGPUs)
	}
	return client.NodeReturn{Index: idx, NodeID: n.ID, Message: msg}, nil
}

// drainCollector exports the replicated drain counters, so every server
// reports the same totals and none restart at zero with a new leader.
type drainCollector struct {
	s                                         *Server
	started, completed, transitions, returned *prometheus.Desc
	requeued, lost, phases                    *prometheus.Desc
}

func newDrainCollector(s *Server) *drainCollector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &drainCollector{s: s,
		started:     d("allot_drains_started_total", "Drains started, by cause (unhealthy, nomad-drain).", "cause"),
		completed:   d("allot_drains_completed_total", "Drains completed (node empty, or returned before it emptied), by cause and how: automatic (no operator acted) or manual.", "cause", "how"),
		transitions: d("allot_node_transitions_total", "Node drain-lifecycle transitions, by the phase entered.", "phase"),
		returned:    d("allot_nodes_returned_total", "Nodes returned to service after a drain, by who returned them (policy, operator).", "by"),
		requeued:    d("allot_drain_allocations_requeued_total", "Allocations allot moved off draining nodes (migrations: requeued elsewhere)."),
		lost:        d("allot_drain_gpu_hours_lost_total", "Healthy GPU-hours left idle on nodes while cordoned or draining."),
		phases:      d("allot_nodes_drain_phase", "GPU nodes by drain-lifecycle phase.", "phase"),
	}
}

func (c *drainCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.started, c.completed, c.transitions, c.returned, c.requeued, c.lost, c.phases} {
		ch <- d
	}
}

func (c *drainCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.s.fsm.Read()
	st := v.DrainStats()
	counter := func(d *prometheus.Desc, x float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, x, labels...)
	}
	for cause, n := range st.Started {
		counter(c.started, float64(n), cause)
	}
	for key, n := range st.Completed {
		cause, how, _ := strings.Cut(key, "/")
		counter(c.completed, float64(n), cause, how)
	}
	for phase, n := range st.Transitions {
		counter(c.transitions, float64(n), phase)
	}
	for by, n := range st.Returned {
		counter(c.returned, float64(n), by)
	}
	counter(c.requeued, float64(st.Requeued))
	counter(c.lost, float64(st.GPUSecondsLost)/3600)
	phases := map[policy.NodeState]int{policy.NodeNormal: 0, policy.NodeCordoned: 0, policy.NodeDraining: 0,
		policy.NodeDrained: 0, policy.NodeReturned: 0}
	for _, n := range v.Nodes() {
		phase := policy.NodeNormal
		if r := v.Drain(n.ID); r != nil {
			phase = r.Phase
		}
		phases[phase]++
	}
	for phase, n := range phases {
		ch <- prometheus.MustNewConstMetric(c.phases, prometheus.GaugeValue, float64(n), phase.Phase())
	}
}
