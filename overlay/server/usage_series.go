package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/client"
	"github.com/allot-sched/allot/overlay/state"
)

// seriesSteps are the steps GET /v1/usage/series picks from when none is
// asked for: the smallest giving at most maxSeriesPoints points.
var seriesSteps = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour,
	3 * time.Hour, 6 * time.Hour, 24 * time.Hour}

// maxSeriesPoints bounds the default resolution: about one point per two
// pixels of a wide chart, and 14 days at 1h (336 points) for 1,000 leaves
// stays well under a second to compute and encode.
const maxSeriesPoints = 500

// maxSeriesSteps bounds an explicit step, so that one request cannot ask
// for 14 days of 1-minute points for every child of a large budget.
const maxSeriesSteps = 10080 // 7 days of minutes: far more points than a chart has pixels

// getUsageSeries answers GET /v1/usage/series?budget=P&since=7d&step=1h:
// for budget P (the root by default) and each of its children, the average
// GPUs used and wanted per step, with each one's allocation.
func (s *Server) getUsageSeries(r *http.Request, v *state.View) (any, error) {
	q := r.URL.Query()
	since := 7 * 24 * time.Hour
	if x := q.Get("since"); x != "" {
		d, err := ParseSince(x)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "%v", err)
		}
		since = d
	}
	fsmCfg := s.fsm.Config()
	if since > fsmCfg.Retention {
		return nil, errorf(http.StatusBadRequest, "since %v reaches beyond the ledger's %v of history", since, fsmCfg.Retention)
	}
	bucket := fsmCfg.Bucket
	if bucket <= 0 {
		bucket = budgets.DefaultBucket
	}
	step := time.Duration(0)
	if x := q.Get("step"); x != "" {
		d, err := ParseSince(x)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "step: %v", err)
		}
		if d%bucket != 0 {
			return nil, errorf(http.StatusBadRequest, "step %v: want a multiple of the ledger's %v buckets", d, bucket)
		}
		if since/d > maxSeriesSteps {
			return nil, errorf(http.StatusBadRequest, "step %v over %v gives %d points; at most %d (use a larger step)", d, since, since/d, maxSeriesSteps)
		}
		step = d
	} else {
		step = seriesSteps[len(seriesSteps)-1]
		for _, d := range seriesSteps {
			if d%bucket == 0 && since/d <= maxSeriesPoints {
				step = d
				break
			}
		}
	}
	to := s.cfg.Clock().UTC().Truncate(bucket)
	out := &client.UsageSeries{From: to.Add(-since), To: to, Step: step, StepSeconds: int64(step / time.Second),
		LookbackSeconds: int64(s.cfg.Lookback / time.Second), RetentionSeconds: int64(fsmCfg.Retention / time.Second),
		Times: []int64{}, Series: []client.BudgetSerie{}}
	for _, n := range v.Nodes() {
		out.CapacityGPUs += n.TotalGPUs
	}
	b := v.Budgets()
	if b == nil {
		if p := q.Get("budget"); p != "" {
			return nil, errorf(http.StatusNotFound, "budget %q: no budget tree has been applied yet", p)
		}
		return compactJSON{out}, nil
	}
	tree := b.Tree()
	node := tree.Root()
	if p := q.Get("budget"); p != "" {
		n, ok := tree.Lookup(p)
		if !ok {
			return nil, errorf(http.StatusNotFound, "budget %q is not in the budget tree in force (revision %s)", p, b.Revision)
		}
		node = n
	}
	var periods [][2]time.Time
	for t := out.From; t.Before(out.To); t = t.Add(step) {
		periods = append(periods, [2]time.Time{t, stepEnd(t, step, out.To)})
		out.Times = append(out.Times, t.Unix())
	}
	shown := append([]*budgets.Node{node}, node.Children...)
	used := make([][]int64, len(shown))
	wanted := make([][]int64, len(shown))
	for i := range shown {
		used[i], wanted[i] = make([]int64, len(periods)), make([]int64, len(periods))
	}
	// Each leaf under node is read once, into node's row and the row of
	// the child it lies under.
	s.fsm.WithLedger(func(l *budgets.Ledger) {
		w := l.Windows(periods)
		for k, child := range shown[1:] {
			for _, leaf := range leavesUnder(tree, child) {
				l.AddWindowSums(leaf.Path, w, false, used[k+1])
				l.AddWindowSums(leaf.Path, w, true, wanted[k+1])
			}
		}
		if len(shown) == 1 {
			l.AddWindowSums(node.Path, w, false, used[0])
			l.AddWindowSums(node.Path, w, true, wanted[0])
		}
	})
	for k := 1; k < len(shown); k++ {
		for i := range periods {
			used[0][i] += used[k][i]
			wanted[0][i] += wanted[k][i]
		}
	}
	for k, n := range shown {
		row := client.BudgetSerie{Path: n.Path, Leaf: n.IsLeaf(), Program: program(n), Effective: n.Effective,
			AllocationGPUs: round3(n.Effective * float64(out.CapacityGPUs)),
			UsedGPUs:       make([]float64, len(periods)), DemandGPUs: make([]float64, len(periods))}
		for i, p := range periods {
			secs := p[1].Sub(p[0]).Seconds()
			row.UsedGPUs[i] = round3(float64(used[k][i]) / secs)
			row.DemandGPUs[i] = round3(float64(wanted[k][i]) / secs)
		}
		out.Series = append(out.Series, row)
	}
	return compactJSON{out}, nil
}

// stepEnd is the end of the step starting at t: t+step, or to for the last.
func stepEnd(t time.Time, step time.Duration, to time.Time) time.Time {
	if e := t.Add(step); e.Before(to) {
		return e
	}
	return to
}

// leavesUnder returns the leaves of t under n (n itself when it is a leaf):
// a contiguous run of t.Leaves().
func leavesUnder(t *budgets.Tree, n *budgets.Node) []*budgets.Node {
	first, last := n, n
	for !first.IsLeaf() {
		first = first.Children[0]
	}
	for !last.IsLeaf() {
		last = last.Children[len(last.Children)-1]
	}
	return t.Leaves()[first.LeafIndex : last.LeafIndex+1]
}

// program is the child of the root that n lies under ("" for the root): the
// UI groups colours by it.
func program(n *budgets.Node) string {
	if n.Parent == nil {
		return ""
	}
	for n.Parent.Parent != nil {
		n = n.Parent
	}
	return n.Path
}

// round3 keeps three decimals: a thousandth of a GPU is below what a chart
// or a person reads, and it keeps the answer small.
func round3(x float64) float64 {
	if x < 0 {
		return -round3(-x)
	}
	return float64(int64(x*1000+0.5)) / 1000
}

// compactJSON marks an answer written without indentation: series answers
// run to megabytes, and indenting one number per line would triple them.
type compactJSON struct{ v any }

// hasBudgetPrefix reports whether path is budget or lies under it.
func hasBudgetPrefix(path, budget string) bool {
	return path == budget || strings.HasPrefix(path, budget+"/")
}
