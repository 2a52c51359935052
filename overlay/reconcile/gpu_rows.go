package reconcile

import (
	"sort"
	"unicode/utf8"

	"github.com/allot-sched/allot/overlay/nomad"
	"github.com/allot-sched/allot/overlay/state"
)

// gpuRows lists a node's GPU instances for its state row, by model then
// instance ID, each string cut to the state's bound. A node with more than
// state.MaxNodeGPUs instances keeps its unhealthy ones first, so a fault is
// never the one left out; the row's TotalGPUs still counts every instance.
func gpuRows(n *nomad.Node) []state.NodeGPU {
	var out []state.NodeGPU
	for _, m := range n.GPUs {
		model := clip(m.Model, state.MaxIDBytes)
		for _, id := range m.HealthyIDs {
			out = append(out, state.NodeGPU{ID: clip(id, state.MaxIDBytes), Model: model, Healthy: true})
		}
		for _, u := range m.Unhealthy {
			out = append(out, state.NodeGPU{ID: clip(u.ID, state.MaxIDBytes), Model: model,
				Reason: clip(u.Reason, state.MaxGPUReasonBytes)})
		}
	}
	byModelID := func(i, j int) bool {
		if out[i].Model != out[j].Model {
			return out[i].Model < out[j].Model
		}
		return out[i].ID < out[j].ID
	}
	sort.SliceStable(out, byModelID)
	if len(out) > state.MaxNodeGPUs {
		sort.SliceStable(out, func(i, j int) bool { return !out[i].Healthy && out[j].Healthy })
		out = out[:state.MaxNodeGPUs]
		sort.SliceStable(out, byModelID)
	}
	return out
}

// clip cuts s to at most max bytes on a rune boundary, marking the cut.
func clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const more = "…"
	cut := max - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}
