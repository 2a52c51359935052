package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
)

// CheckOptions controls Trace.Check.
type CheckOptions struct {
	// SkipInvalid drops the jobs and health events Check would refuse and
	// counts them in Trace.Skipped.
	SkipInvalid bool
	// Contract is the contract configuration of the allot policy (its
	// runtime cap), against which each job's meta is read.
	Contract contract.Config
}

// Check finds, before a run, what the run would otherwise take silently.
// A job spec could never hold (more GPUs per allocation than the largest
// node, or more allocations than the nodes hold at once) and a health event for a
// node or GPU spec does not have are errors (*TraceError, naming the row's
// line). What the allot contract would warn about each job's meta (a budget
// the tree does not have or that has sub-budgets, a min_runtime above the
// cap, ...) comes back as warnings counted by kind, in a fixed order.
func (tr *Trace) Check(spec ClusterSpec, tree *budgets.Tree, opt CheckOptions) ([]TraceWarning, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	noNode, err := tr.checkFit(spec, opt.SkipInvalid)
	if err != nil {
		return nil, err
	}
	gpus := nodeGPUs(spec)
	kept := tr.Health[:0]
	for k := range tr.Health {
		h := &tr.Health[k]
		if err := healthErr(h, gpus, spec); err != nil {
			if !opt.SkipInvalid {
				return nil, err
			}
			tr.Skipped++
			continue
		}
		kept = append(kept, *h)
	}
	tr.Health = kept
	warnings := tr.contractWarnings(tree, opt.Contract)
	if noNode != nil {
		warnings = append([]TraceWarning{*noNode}, warnings...)
	}
	return warnings, nil
}

// checkFit refuses (or drops) jobs the nodes of their pool and model could
// never place, and counts the jobs whose pool and model no node has: Nomad
// takes them and leaves them blocked for ever, so the run keeps them, never
// placed, and says so before it starts.
func (tr *Trace) checkFit(spec ClusterSpec, skip bool) (*TraceWarning, error) {
	var none TraceWarning
	kept := tr.Jobs[:0]
	for k := range tr.Jobs {
		j := &tr.Jobs[k]
		pools := poolsFor(spec, j)
		if len(pools.Pools) == 0 {
			if none.Count == 0 {
				none = TraceWarning{Kind: WarnNoNode, First: *j, Detail: noNodeDetail(spec, j)}
			}
			none.Count++
			kept = append(kept, *j)
			continue
		}
		largest, pool := 0, ""
		for _, p := range pools.Pools {
			if p.GPUsPerNode > largest {
				largest, pool = p.GPUsPerNode, p.Name
			}
		}
		var err error
		switch {
		case j.GPUs > largest:
			err = traceErr(j.Line, 0, "job %s asks %d GPUs per allocation, but the largest node%s has %d (pool %s): it could never be placed; "+
				"split it into allocations of at most %d GPUs (count) or run a larger cluster", quote(j.ID), j.GPUs, pools.of(spec), largest, quote(pool), largest)
		case j.Count > 1 && allocSlots(pools, j.GPUs) < j.Count:
			err = traceErr(j.Line, 0, "job %s asks %d allocations of %d GPUs, but the cluster's nodes%s hold at most %d of them at once: it could never be placed",
				quote(j.ID), j.Count, j.GPUs, pools.of(spec), allocSlots(pools, j.GPUs))
		}
		if err != nil {
			if !skip {
				return nil, err
			}
			tr.Skipped++
			continue
		}
		kept = append(kept, *j)
	}
	tr.Jobs = kept
	if none.Count == 0 {
		return nil, nil
	}
	return &none, nil
}

// poolsFor is the part of spec that job j may be placed on: the pools of
// its node pool ("default" when it names none) and, when it names a
// model, of that model.
func poolsFor(spec ClusterSpec, j *JobSpec) ClusterSpec {
	var out ClusterSpec
	for _, p := range spec.Pools {
		if p.Nomad() == j.NodePool() && (j.Model == "" || j.Model == p.Model) {
			out.Pools = append(out.Pools, p)
		}
	}
	return out
}

// of is " of pool X" (" of pool X, model M") when part is less than all of
// spec, for messages about the nodes a job may use.
func (part ClusterSpec) of(spec ClusterSpec) string {
	if len(part.Pools) == len(spec.Pools) {
		return ""
	}
	return " its pool and model allow"
}

// noNodeDetail says why no node admits job j and what the cluster has.
func noNodeDetail(spec ClusterSpec, j *JobSpec) string {
	var have []string
	for _, p := range spec.Pools {
		have = append(have, fmt.Sprintf("%s (%s)", quote(p.Nomad()), p.Model))
	}
	ask := "pool " + quote(j.NodePool())
	if j.Pool == "" {
		ask = "no pool, so Nomad's \"default\""
	}
	if j.Model != "" {
		ask += ", model " + quote(j.Model)
	}
	return fmt.Sprintf("job %s names %s, and no node is in it; Nomad never places such a job (it stays blocked). "+
		"The cluster's node pools (model): %s; give the job a pool column naming one", quote(j.ID), ask, strings.Join(have, ", "))
}

// allocSlots is how many allocations of gpus GPUs the empty cluster holds
// at once (an allocation's GPUs are on one node).
func allocSlots(spec ClusterSpec, gpus int) int {
	n := 0
	for _, p := range spec.Pools {
		n += p.Nodes * (p.GPUsPerNode / gpus)
	}
	return n
}

// nodeGPUs is the GPUs of each node of spec, by the name the model gives it.
func nodeGPUs(spec ClusterSpec) map[string]int {
	gpus := make(map[string]int, spec.GPUs())
	for _, p := range spec.Pools {
		for i := 0; i < p.Nodes; i++ {
			gpus[p.Name+"-"+strconv.Itoa(i)] = p.GPUsPerNode
		}
	}
	return gpus
}

// healthErr says what is wrong with a health event on a cluster whose
// nodes have the GPUs of gpus, nil when nothing is.
func healthErr(h *HealthEvent, gpus map[string]int, spec ClusterSpec) error {
	n, ok := gpus[h.Node]
	switch {
	case !ok:
		var pools []string
		for _, p := range spec.Pools {
			pools = append(pools, fmt.Sprintf("%s-0 to %s-%d", p.Name, p.Name, p.Nodes-1))
		}
		return traceErr(h.Line, 0, "health event names node %s, which the cluster does not have; its nodes are %s",
			quote(h.Node), strings.Join(pools, ", "))
	case h.GPU >= n:
		return traceErr(h.Line, 0, "health event for GPU %d of node %s, which has %d GPUs (0 to %d); give one of them, or -1 (or empty) for the whole node",
			h.GPU, quote(h.Node), n, n-1)
	}
	return nil
}

// WarningKind is what a trace warning is about.
type WarningKind uint8

// Kinds of trace warnings, in the order Check returns them.
const (
	WarnNoNode WarningKind = iota // no node is in the job's pool (and of its model): it never places
	WarnUnknownBudget
	WarnNonLeafBudget
	WarnNoBudget
	WarnNoTree
	WarnMinRuntimeCap
	WarnOther
	numWarningKinds
)

// warningPhrases are each kind's words after the count, for one job and
// for several; the contract's own warning on the first job says what
// becomes of them.
var warningPhrases = [numWarningKinds][2]string{
	{"job asks a pool and model no node has and will never be placed", "jobs ask a pool and model no node has and will never be placed"},
	{"job names an unknown budget", "jobs name an unknown budget"},
	{"job names a budget with sub-budgets", "jobs name a budget with sub-budgets"},
	{"job has a min_runtime but no budget", "jobs have a min_runtime but no budget"},
	{"job names a budget, but no budget tree is loaded (-budgets)", "jobs name a budget, but no budget tree is loaded (-budgets)"},
	{"job asks a min_runtime above the cap", "jobs ask a min_runtime above the cap"},
	{"job has meta the contract corrects", "jobs have meta the contract corrects"},
}

// TraceWarning counts the jobs of one kind of problem and shows the first.
type TraceWarning struct {
	Kind  WarningKind
	Count int
	// First is the first job of the kind (in submit order) and what the
	// contract said of it.
	First   JobSpec
	Warning contract.Warning
	// Detail, when set, says what is wrong with First instead of Warning
	// (a problem of placement, not of the job's meta).
	Detail string
}

func (w TraceWarning) String() string {
	phrase := warningPhrases[w.Kind][1]
	if w.Count == 1 {
		phrase = warningPhrases[w.Kind][0]
	}
	where := ""
	if w.First.Line > 0 {
		where = "line " + strconv.Itoa(w.First.Line) + " "
	}
	what := w.Warning.String()
	if w.Detail != "" {
		what = w.Detail
	}
	return fmt.Sprintf("%d %s (first: %s%s)", w.Count, phrase, where, what)
}

// contractWarnings reads each job's contract as the allot policy does and
// counts its warnings by kind.
func (tr *Trace) contractWarnings(tree *budgets.Tree, cfg contract.Config) []TraceWarning {
	// What the contract knows of the tree: the policy's own leaf check, and
	// the did-you-mean and the leaves under an inner budget for the warnings.
	var known contract.Budgets
	if tree != nil {
		known = contract.Budgets{
			Leaf: func(p string) (bool, bool) {
				n, ok := tree.Lookup(p)
				return ok, ok && n.IsLeaf()
			},
			Nearest: tree.NearestLeaf,
			Under:   tree.LeavesUnder,
		}
	}
	var byKind [numWarningKinds]TraceWarning
	// Jobs with the same meta warn alike (the job's name aside): parse each
	// meta once. The contract is the one Allot.Init reads (the same meta and
	// leaf check); only the warnings' hints come on top.
	type metaKey struct {
		minRuntime time.Duration
		resumable  bool
		priority   int
		budget     string
		signal     string
		notice     time.Duration
		session    bool
	}
	parsed := map[metaKey][]contract.Warning{}
	for k := range tr.Jobs {
		j := &tr.Jobs[k]
		key := metaKey{j.MinRuntime, j.Resumable, j.Priority, j.Budget, j.Signal, j.Notice, j.Class == ClassInteractive}
		ws, ok := parsed[key]
		if !ok {
			ws = contract.ParseIn(j.ID, jobMeta(j), cfg, known).Warnings
			parsed[key] = ws
		}
		for _, w := range ws {
			kind := warningKind(w, tree)
			bk := &byKind[kind]
			if bk.Count == 0 {
				w.Job = j.ID
				bk.Kind, bk.First, bk.Warning = kind, *j, w
			}
			bk.Count++
		}
	}
	var out []TraceWarning
	for _, w := range byKind {
		if w.Count > 0 {
			out = append(out, w)
		}
	}
	return out
}

// jobMeta is the Nomad meta a job of the trace stands for.
func jobMeta(j *JobSpec) map[string]string {
	meta := map[string]string{
		contract.KeyMinRuntime: j.MinRuntime.String(),
		contract.KeyResumable:  strconv.FormatBool(j.Resumable),
		contract.KeyPriority:   strconv.Itoa(j.Priority),
	}
	if j.Budget != "" {
		meta[contract.KeyBudget] = j.Budget
	}
	if j.Signal != "" || j.Notice > 0 {
		meta[contract.KeyCheckpointSignal], meta[contract.KeyCheckpointNotice] = j.Signal, j.Notice.String()
		if j.Class == ClassInteractive {
			meta[contract.KeyClass] = contract.ClassSession // an interactive job with a notice is a restorable session
		}
	}
	return meta
}

// warningKind sorts a contract warning by what caused it.
func warningKind(w contract.Warning, tree *budgets.Tree) WarningKind {
	switch w.Key {
	case contract.KeyMinRuntime:
		return WarnMinRuntimeCap // a trace's min_runtime is a valid duration >= 0: only the cap can warn
	case contract.KeyBudget:
		budget := strings.TrimSpace(w.Value)
		switch n, ok := lookup(tree, budget); {
		case budget == "":
			return WarnNoBudget
		case tree == nil:
			return WarnNoTree
		case !ok:
			return WarnUnknownBudget
		case !n.IsLeaf():
			return WarnNonLeafBudget
		}
	}
	return WarnOther
}

func lookup(tree *budgets.Tree, path string) (*budgets.Node, bool) {
	if tree == nil {
		return nil, false
	}
	return tree.Lookup(path)
}
