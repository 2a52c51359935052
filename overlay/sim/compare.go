package sim

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// DefaultCompareSlack is how far apart a job's starts may be before Compare
// calls it a divergence: the fidelity target's 2 trace minutes.
const DefaultCompareSlack = 2 * time.Minute

// CompareOptions tune Compare.
type CompareOptions struct {
	// Tie: two starts of one side closer than this are a tie in the start
	// order (Kendall's tau-b leaves the pair out). A real cluster starts jobs
	// submitted together in an order its own latencies decide; 0 ties only
	// equal times.
	Tie time.Duration
	// Slack: a job whose starts on the two sides are further apart than this
	// is a divergence (default DefaultCompareSlack).
	Slack time.Duration
	// Horizon ends both logs (trace time): GPU time is counted up to it and a
	// job never started waits until it. 0: the later of the two logs' last
	// events.
	Horizon time.Duration
	// Divergences is how many divergences to list (default 5).
	Divergences int
	// Alike names the groups of interchangeable jobs (AlikeJobs: rows of the
	// trace the same but for the name), job -> group. Which of them a
	// cluster stops or starts first is a coin toss (Nomad picks among equal
	// victims and equal starts in no set order), so within each group B's
	// jobs take A's names, matched to agree best (matchAlike), and pairs of
	// one group are tied in the start order. nil: every job is its own.
	Alike map[string]string
}

// Fidelity is what Compare measures of two event logs of one trace: A (a
// real Nomad, say) and B (the model). Times are trace seconds.
type Fidelity struct {
	Horizon float64 `json:"horizon_s"`
	// Jobs submitted on both sides; OnlyA and OnlyB were submitted on one.
	Jobs  int      `json:"jobs"`
	OnlyA []string `json:"only_a,omitempty"`
	OnlyB []string `json:"only_b,omitempty"`
	// StartedBoth jobs started on both sides; StartedOnlyA/B on one only.
	StartedBoth  int      `json:"started_both"`
	StartedOnlyA []string `json:"started_only_a,omitempty"`
	StartedOnlyB []string `json:"started_only_b,omitempty"`
	// Tau is Kendall's tau-b over the first start times of the jobs started
	// on both sides (1: the same order); Concordant and Discordant count the
	// pairs in the same and the opposite order, TiedPairs those tied on
	// either side. OrderShare is Concordant / (Concordant + Discordant).
	Tau        float64 `json:"tau"`
	OrderShare float64 `json:"order_share"`
	Concordant int     `json:"concordant_pairs"`
	Discordant int     `json:"discordant_pairs"`
	TiedPairs  int     `json:"tied_pairs"`
	// Stopped jobs are those with an allocation stopped before it finished
	// (any reason but "finished" and "job-update": an allocation replaced
	// before it ran), on both sides or on one. StopMatch is
	// both / (both + only A + only B), 1 when neither side stopped any.
	StoppedBoth  []string `json:"stopped_both,omitempty"`
	StoppedOnlyA []string `json:"stopped_only_a,omitempty"`
	StoppedOnlyB []string `json:"stopped_only_b,omitempty"`
	StopMatch    float64  `json:"stop_match"`
	// Stops counts each side's stops by reason.
	StopsA map[string]int `json:"stops_a"`
	StopsB map[string]int `json:"stops_b"`
	// Waits: each side's first-start waits (a job never started waits to
	// the horizon) over the jobs of both sides, and the per-job absolute
	// differences.
	WaitA    Quantiles `json:"wait_a"`
	WaitB    Quantiles `json:"wait_b"`
	WaitDiff Quantiles `json:"wait_diff"`
	// Budgets: GPU time held per budget leaf on each side ("" is
	// unallocated work), GPU hours.
	Budgets []BudgetTime `json:"budgets"`
	// Divergences are the first jobs whose life differs, earliest first.
	Divergences []Divergence `json:"divergences,omitempty"`
	// AlikeJobs are the jobs of both sides in groups of CompareOptions.Alike,
	// Renamed those of B that took another job's name.
	AlikeJobs int `json:"alike_jobs,omitempty"`
	Renamed   int `json:"renamed,omitempty"`
}

// Quantiles are p50 and p90 in seconds.
type Quantiles struct {
	P50 float64 `json:"p50_s"`
	P90 float64 `json:"p90_s"`
}

// BudgetTime is a budget's GPU hours on both sides.
type BudgetTime struct {
	Budget string  `json:"budget"`
	A      float64 `json:"a_gpu_hours"`
	B      float64 `json:"b_gpu_hours"`
	// Diff is (B - A) / A (0 when both are 0, +Inf when only A is 0).
	Diff float64 `json:"diff"`
}

// Divergence is a job whose life differs between the sides, with each
// side's events of that job and the other events around it.
type Divergence struct {
	At   float64 `json:"t"`
	Job  string  `json:"job"`
	What string  `json:"what"`
	A    []Event `json:"a"`
	B    []Event `json:"b"`
}

// jobLife is what one side's log says of one job.
type jobLife struct {
	submit, start float64 // start -1: never
	budget        string
	stops         []string // reasons of stops other than "finished", in order
	firstStop     float64
	events        []int
}

// lives reads a log into per-job lives and GPU time per budget up to horizon.
func lives(evs []Event, horizon float64) (map[string]*jobLife, map[string]float64) {
	jobs := map[string]*jobLife{}
	gpuSec := map[string]float64{}
	type open struct {
		job  string
		gpus int
		t    float64
	}
	allocs := map[string]open{}
	get := func(id string) *jobLife {
		l := jobs[id]
		if l == nil {
			l = &jobLife{submit: -1, start: -1, firstStop: -1}
			jobs[id] = l
		}
		return l
	}
	charge := func(o open, to float64) {
		if l := jobs[o.job]; l != nil {
			gpuSec[l.budget] += float64(o.gpus) * max(min(to, horizon)-min(o.t, horizon), 0)
		}
	}
	for k := range evs {
		e := &evs[k]
		if e.Job == "" {
			continue
		}
		l := get(e.Job)
		l.events = append(l.events, k)
		switch e.Kind {
		case EventSubmit:
			if l.submit < 0 {
				l.submit, l.budget = e.T, e.Budget
			}
		case EventStart:
			if l.start < 0 {
				l.start = e.T
			}
		case EventPlace:
			allocs[e.Alloc] = open{job: e.Job, gpus: e.GPUs, t: e.T}
		case EventStop:
			if o, ok := allocs[e.Alloc]; ok {
				charge(o, e.T)
				delete(allocs, e.Alloc)
			}
			if e.Reason != StopFinished.String() && e.Reason != StopJobUpdate.String() {
				if l.firstStop < 0 {
					l.firstStop = e.T
				}
				l.stops = append(l.stops, e.Reason)
			}
		}
	}
	for _, o := range allocs {
		charge(o, horizon)
	}
	return jobs, gpuSec
}

// Compare measures how alike two event logs of one trace are.
func Compare(a, b []Event, o CompareOptions) *Fidelity {
	if o.Slack <= 0 {
		o.Slack = DefaultCompareSlack
	}
	if o.Divergences <= 0 {
		o.Divergences = 5
	}
	a, b = byTime(a), byTime(b)
	horizon := o.Horizon.Seconds()
	if horizon <= 0 {
		for _, evs := range [][]Event{a, b} {
			for k := range evs {
				horizon = max(horizon, evs[k].T)
			}
		}
	}
	la, ga := lives(a, horizon)
	lb, gb := lives(b, horizon)
	c := &Fidelity{Horizon: horizon, StopsA: stopCounts(a), StopsB: stopCounts(b)}
	if len(o.Alike) > 0 {
		var rename map[string]string
		rename, c.AlikeJobs = matchAlike(la, lb, o.Alike, horizon)
		if len(rename) > 0 {
			c.Renamed = len(rename)
			b = renameJobs(b, rename)
			lb, gb = lives(b, horizon)
		}
	}
	var both []string
	for id, l := range la {
		if l.submit < 0 {
			continue
		}
		if m := lb[id]; m != nil && m.submit >= 0 {
			both = append(both, id)
		} else {
			c.OnlyA = append(c.OnlyA, id)
		}
	}
	for id, l := range lb {
		if m := la[id]; l.submit >= 0 && (m == nil || m.submit < 0) {
			c.OnlyB = append(c.OnlyB, id)
		}
	}
	slices.Sort(both)
	slices.Sort(c.OnlyA)
	slices.Sort(c.OnlyB)
	c.Jobs = len(both)
	var sa, sb []float64
	var group []string // the started jobs' Alike groups ("": none)
	var wa, wb, wd []int64
	slack := o.Slack.Seconds()
	var divs []Divergence
	for _, id := range both {
		x, y := la[id], lb[id]
		p, q := x.wait(horizon), y.wait(horizon)
		wa, wb = append(wa, int64(math.Round(p))), append(wb, int64(math.Round(q)))
		wd = append(wd, int64(math.Round(math.Abs(p-q))))
		switch {
		case x.start >= 0 && y.start >= 0:
			c.StartedBoth++
			sa, sb = append(sa, x.start), append(sb, y.start)
			group = append(group, o.Alike[id])
			if math.Abs(x.start-y.start) > slack {
				divs = append(divs, Divergence{At: min(x.start, y.start), Job: id,
					What: fmt.Sprintf("starts %s apart (A at %s, B at %s)", fmtWait(math.Abs(x.start-y.start)), fmtWait(x.start), fmtWait(y.start))})
			}
		case x.start >= 0:
			c.StartedOnlyA = append(c.StartedOnlyA, id)
			divs = append(divs, Divergence{At: x.start, Job: id, What: "started on A only (at " + fmtWait(x.start) + ")"})
		case y.start >= 0:
			c.StartedOnlyB = append(c.StartedOnlyB, id)
			divs = append(divs, Divergence{At: y.start, Job: id, What: "started on B only (at " + fmtWait(y.start) + ")"})
		}
		switch sx, sy := len(x.stops) > 0, len(y.stops) > 0; {
		case sx && sy:
			c.StoppedBoth = append(c.StoppedBoth, id)
		case sx:
			c.StoppedOnlyA = append(c.StoppedOnlyA, id)
			divs = append(divs, Divergence{At: x.firstStop, Job: id, What: "stopped on A only (" + strings.Join(x.stops, ", ") + ")"})
		case sy:
			c.StoppedOnlyB = append(c.StoppedOnlyB, id)
			divs = append(divs, Divergence{At: y.firstStop, Job: id, What: "stopped on B only (" + strings.Join(y.stops, ", ") + ")"})
		}
	}
	c.Tau, c.Concordant, c.Discordant, c.TiedPairs = kendallTauB(sa, sb, group, o.Tie.Seconds())
	if n := c.Concordant + c.Discordant; n > 0 {
		c.OrderShare = float64(c.Concordant) / float64(n)
	} else {
		c.OrderShare = 1
	}
	c.StopMatch = 1
	if n := len(c.StoppedBoth) + len(c.StoppedOnlyA) + len(c.StoppedOnlyB); n > 0 {
		c.StopMatch = float64(len(c.StoppedBoth)) / float64(n)
	}
	c.WaitA, c.WaitB, c.WaitDiff = quantilesOf(wa), quantilesOf(wb), quantilesOf(wd)
	budgetNames := map[string]bool{}
	for k := range ga {
		budgetNames[k] = true
	}
	for k := range gb {
		budgetNames[k] = true
	}
	for name := range budgetNames {
		bt := BudgetTime{Budget: name, A: ga[name] / 3600, B: gb[name] / 3600}
		switch {
		case bt.A > 0:
			bt.Diff = (bt.B - bt.A) / bt.A
		case bt.B > 0:
			bt.Diff = math.Inf(1)
		}
		c.Budgets = append(c.Budgets, bt)
	}
	sort.Slice(c.Budgets, func(i, j int) bool { return c.Budgets[i].Budget < c.Budgets[j].Budget })
	sort.SliceStable(divs, func(i, j int) bool { return divs[i].At < divs[j].At })
	for k := range divs {
		if k == o.Divergences {
			break
		}
		d := divs[k]
		d.A, d.B = around(a, la[d.Job], d.At, slack), around(b, lb[d.Job], d.At, slack)
		c.Divergences = append(c.Divergences, d)
	}
	return c
}

// wait is the job's first-start wait; a job never started waits until the
// horizon.
func (l *jobLife) wait(horizon float64) float64 {
	if l.start < 0 {
		return max(horizon-l.submit, 0)
	}
	return l.start - l.submit
}

// AlikeJobs groups the trace's interchangeable jobs, those whose rows are
// the same but for the name (submitted at the same instant, the same ask,
// work, contract and priority): job -> group, for groups of two or more
// (CompareOptions.Alike).
func AlikeJobs(tr *Trace) map[string]string {
	groups := map[JobSpec][]string{}
	var keys []JobSpec
	for _, sp := range tr.Jobs {
		k := sp
		k.ID, k.Line = "", 0
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], sp.ID)
	}
	out := map[string]string{}
	for _, k := range keys {
		if ids := groups[k]; len(ids) > 1 {
			for _, id := range ids {
				out[id] = ids[0]
			}
		}
	}
	return out
}

// matchAlike matches each Alike group's jobs on side B to those on side A
// (both submitted on both sides) so that the two agree best: the fewest
// jobs stopped on one side only, then the least sum of wait differences
// (an assignment problem, solved exactly), a job keeping its own name
// where that costs nothing more. It returns B's renames (old -> new name;
// only jobs that change) and how many jobs the groups hold.
func matchAlike(la, lb map[string]*jobLife, alike map[string]string, horizon float64) (map[string]string, int) {
	members := map[string][]string{}
	for id, g := range alike {
		if x, y := la[id], lb[id]; x != nil && y != nil && x.submit >= 0 && y.submit >= 0 {
			members[g] = append(members[g], id)
		}
	}
	var groups []string
	for g := range members {
		groups = append(groups, g)
	}
	slices.Sort(groups)
	rename := map[string]string{}
	n := 0
	for _, g := range groups {
		ids := members[g]
		if len(ids) < 2 {
			continue
		}
		slices.Sort(ids)
		n += len(ids)
		// One stop on one side only outweighs any sum of wait differences.
		stopOnly := float64(len(ids))*max(horizon, 1) + 1
		cost := make([][]float64, len(ids))
		for i, a := range ids {
			cost[i] = make([]float64, len(ids))
			for j, b := range ids {
				x, y := la[a], lb[b]
				c := math.Abs(x.wait(horizon) - y.wait(horizon))
				if (len(x.stops) > 0) != (len(y.stops) > 0) {
					c += stopOnly
				}
				if i != j {
					c += 1e-3 // a job keeps its name on a tie
				}
				cost[i][j] = c
			}
		}
		for i, j := range assign(cost) {
			if i != j {
				rename[ids[j]] = ids[i]
			}
		}
	}
	return rename, n
}

// assign solves the assignment problem of the square cost matrix: p with
// row i assigned column p[i], of least total cost (the Hungarian method,
// O(n³); the groups of alike jobs are small).
func assign(cost [][]float64) []int {
	n := len(cost)
	u, v := make([]float64, n+1), make([]float64, n+1)
	p, way := make([]int, n+1), make([]int, n+1) // p[j]: the row of column j, 1-based
	for i := 1; i <= n; i++ {
		p[0] = i
		j0 := 0
		minv := make([]float64, n+1)
		used := make([]bool, n+1)
		for j := range minv {
			minv[j] = math.Inf(1)
		}
		for {
			used[j0] = true
			i0, delta, j1 := p[j0], math.Inf(1), 0
			for j := 1; j <= n; j++ {
				if used[j] {
					continue
				}
				if cur := cost[i0-1][j-1] - u[i0] - v[j]; cur < minv[j] {
					minv[j], way[j] = cur, j0
				}
				if minv[j] < delta {
					delta, j1 = minv[j], j
				}
			}
			for j := 0; j <= n; j++ {
				if used[j] {
					u[p[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if p[j0] == 0 {
				break
			}
		}
		for j0 != 0 {
			j1 := way[j0]
			p[j0] = p[j1]
			j0 = j1
		}
	}
	out := make([]int, n)
	for j := 1; j <= n; j++ {
		out[p[j]-1] = j - 1
	}
	return out
}

// renameJobs is evs with the jobs of rename (and the preemptors they name)
// renamed.
func renameJobs(evs []Event, rename map[string]string) []Event {
	out := slices.Clone(evs)
	for k := range out {
		if to, ok := rename[out[k].Job]; ok {
			out[k].Job = to
		}
		if to, ok := rename[out[k].By]; ok {
			out[k].By = to
		}
	}
	return out
}

// around is the job's own events and, around at, the side's other events:
// at most 12 in all, in time order.
func around(evs []Event, l *jobLife, at, slack float64) []Event {
	const most = 12
	keep := map[int]bool{}
	for _, k := range l.events {
		keep[k] = true
	}
	// The events nearest to at, of any job or node.
	i := sort.Search(len(evs), func(k int) bool { return evs[k].T >= at-slack })
	for k := i; k < len(evs) && evs[k].T <= at+slack && len(keep) < most; k++ {
		keep[k] = true
	}
	idx := make([]int, 0, len(keep))
	for k := range keep {
		idx = append(idx, k)
	}
	slices.Sort(idx)
	if len(idx) > most {
		idx = idx[:most]
	}
	out := make([]Event, len(idx))
	for n, k := range idx {
		out[n] = evs[k]
	}
	return out
}

// byTime is evs in time order (a stable sort of a copy when out of order).
func byTime(evs []Event) []Event {
	if slices.IsSortedFunc(evs, cmpEventT) {
		return evs
	}
	out := slices.Clone(evs)
	slices.SortStableFunc(out, cmpEventT)
	return out
}

func cmpEventT(x, y Event) int { return cmp.Compare(x.T, y.T) }

func stopCounts(evs []Event) map[string]int {
	m := map[string]int{}
	for k := range evs {
		if evs[k].Kind == EventStop {
			m[evs[k].Reason]++
		}
	}
	return m
}

func quantilesOf(xs []int64) Quantiles {
	s := sortedCopy(xs)
	return Quantiles{P50: float64(percentile(s, .5)), P90: float64(percentile(s, .9))}
}

// kendallTauB is Kendall's tau-b of x and y (paired), with values of one
// side within tie of each other counted as tied, and pairs of one group
// (group[i] == group[j] != ""; nil: none) tied on both sides. It also
// returns the concordant, discordant and tied pairs. O(n²): event logs of
// fidelity runs hold hundreds of jobs.
func kendallTauB(x, y []float64, group []string, tie float64) (tau float64, conc, disc, tied int) {
	n := len(x)
	var tx, ty int
	sign := func(d float64) int {
		switch {
		case d > tie:
			return 1
		case d < -tie:
			return -1
		}
		return 0
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			a, b := sign(x[i]-x[j]), sign(y[i]-y[j])
			if group != nil && group[i] != "" && group[i] == group[j] {
				a, b = 0, 0
			}
			switch {
			case a == 0 || b == 0:
				tied++
				if a == 0 {
					tx++
				}
				if b == 0 {
					ty++
				}
			case a == b:
				conc++
			default:
				disc++
			}
		}
	}
	n0 := n * (n - 1) / 2
	den := math.Sqrt(float64(n0-tx) * float64(n0-ty))
	if den == 0 {
		return 1, conc, disc, tied
	}
	return float64(conc-disc) / den, conc, disc, tied
}

// WriteFidelity prints a comparison as text: A and B are the sides' names.
func WriteFidelity(w io.Writer, c *Fidelity, nameA, nameB string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs on both\t%d (only %s %d, only %s %d), horizon %s\n", c.Jobs, nameA, len(c.OnlyA), nameB, len(c.OnlyB), fmtWait(c.Horizon))
	if c.AlikeJobs > 0 {
		fmt.Fprintf(tw, "interchangeable jobs\t%d (%d of %s's matched to another's name)\n", c.AlikeJobs, c.Renamed, nameB)
	}
	fmt.Fprintf(tw, "started on both\t%d (only %s %d, only %s %d)\n", c.StartedBoth, nameA, len(c.StartedOnlyA), nameB, len(c.StartedOnlyB))
	fmt.Fprintf(tw, "start order: Kendall tau-b\t%.3f (%d pairs in the same order, %d opposite, %d tied; same order %.1f%%)\n",
		c.Tau, c.Concordant, c.Discordant, c.TiedPairs, 100*c.OrderShare)
	fmt.Fprintf(tw, "stopped jobs: both / only %s / only %s\t%d / %d / %d (same set for %.0f%%)\n", nameA, nameB,
		len(c.StoppedBoth), len(c.StoppedOnlyA), len(c.StoppedOnlyB), 100*c.StopMatch)
	fmt.Fprintf(tw, "stops by reason: %s\t%s\n", nameA, fmtCounts(c.StopsA))
	fmt.Fprintf(tw, "stops by reason: %s\t%s\n", nameB, fmtCounts(c.StopsB))
	fmt.Fprintf(tw, "wait p50 / p90: %s\t%s / %s\n", nameA, fmtWait(c.WaitA.P50), fmtWait(c.WaitA.P90))
	fmt.Fprintf(tw, "wait p50 / p90: %s\t%s / %s\n", nameB, fmtWait(c.WaitB.P50), fmtWait(c.WaitB.P90))
	fmt.Fprintf(tw, "per-job wait difference p50 / p90\t%s / %s\n", fmtWait(c.WaitDiff.P50), fmtWait(c.WaitDiff.P90))
	for _, b := range c.Budgets {
		name := b.Budget
		if name == "" {
			name = "(unallocated)"
		}
		fmt.Fprintf(tw, "GPU hours %s\t%s %.2f, %s %.2f (%+.1f%%)\n", name, nameA, b.A, nameB, b.B, 100*b.Diff)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range c.Divergences {
		fmt.Fprintf(w, "\ndivergence at %s: %s %s\n", fmtWait(d.At), d.Job, d.What)
		for _, side := range []struct {
			name string
			evs  []Event
		}{{nameA, d.A}, {nameB, d.B}} {
			for _, e := range side.evs {
				fmt.Fprintf(w, "  %-6s %s\n", side.name, fmtEvent(&e))
			}
		}
	}
	return nil
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// fmtEvent is one event on one line.
func fmtEvent(e *Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%8s %-6s", fmtWait(e.T), e.Kind)
	for _, f := range []struct{ k, v string }{{"job", e.Job}, {"alloc", e.Alloc}, {"node", e.Node}, {"reason", e.Reason}, {"by", e.By}} {
		if f.v != "" {
			fmt.Fprintf(&b, " %s=%s", f.k, f.v)
		}
	}
	if e.GPUs != 0 {
		fmt.Fprintf(&b, " gpus=%d", e.GPUs)
	}
	if e.Eligible != nil {
		fmt.Fprintf(&b, " eligible=%t", *e.Eligible)
	}
	return b.String()
}
