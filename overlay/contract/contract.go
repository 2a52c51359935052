package contract

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The job meta keys a contract is read from.
const (
	KeyBudget     = "budget"
	KeyMinRuntime = "min_runtime"
	KeyResumable  = "resumable"
	KeyPriority   = "priority"
	// The checkpoint notice (docs/design.md, "Notice before a stop").
	KeyCheckpointSignal = "checkpoint_signal"
	KeyCheckpointNotice = "checkpoint_notice"
	// KeyClass = "session" marks a restorable interactive session.
	KeyClass = "class"
)

// Defaults of the contract. DefaultRuntimeCap is the default cap on the
// protected window (docs/design.md, "The scheduling contract");
// DefaultPriority sits in the middle of 0-100.
const (
	DefaultRuntimeCap = 8 * time.Hour
	DefaultPriority   = 50
	MinPriority       = 0
	MaxPriority       = 100
	// DefaultMaxNotice is the default cap on checkpoint_notice.
	DefaultMaxNotice = 10 * time.Minute
	// ClassSession is the class value of a restorable session.
	ClassSession = "session"
)

// Config holds the operator's knobs that shape a contract. The `hcl` tag is
// the server config's key (policy { runtime_cap }): policy.Config embeds
// this Config, so the policy's cap and the contract's are one value.
type Config struct {
	// RuntimeCap bounds the protected window; a larger min_runtime is clamped
	// with a warning. Zero means DefaultRuntimeCap.
	RuntimeCap time.Duration `hcl:"runtime_cap,optional"`
	// MaxNotice bounds checkpoint_notice (policy { max_checkpoint_notice
	// }); a longer notice is clamped with a warning. Zero means
	// DefaultMaxNotice.
	MaxNotice time.Duration `hcl:"max_checkpoint_notice,optional"`
}

func (c Config) maxNotice() time.Duration {
	if c.MaxNotice <= 0 {
		return DefaultMaxNotice
	}
	return c.MaxNotice
}

func (c Config) runtimeCap() time.Duration {
	if c.RuntimeCap <= 0 {
		return DefaultRuntimeCap
	}
	return c.RuntimeCap
}

// LeafCheck reports whether a budget path exists in the budget tree and
// whether it is a leaf (the only budgets jobs may name). A nil LeafCheck means
// no budget tree is loaded: every budget is unknown.
type LeafCheck func(path string) (exists, leaf bool)

// Budgets is what Parse knows of the budget tree. The zero value means no
// budget tree is loaded.
type Budgets struct {
	// Leaf says which paths exist and are leaves.
	Leaf LeafCheck
	// Nearest, when set, names the leaf closest in spelling to a budget the
	// tree does not have, "" when none is close (budgets.Tree.NearestLeaf):
	// the did-you-mean of the warning.
	Nearest func(path string) string
	// Under, when set, lists the leaves below an inner budget
	// (budgets.Tree.LeavesUnder), named in the warning about it.
	Under func(path string) []string
}

// Contract is a job's scheduling contract.
type Contract struct {
	// Allocated is true when the job asked for a positive min_runtime and
	// named a budget leaf: it is charged, protected, and may time-slice.
	// Otherwise the job is unallocated: free, never protected.
	Allocated bool
	// Budget is the budget meta value as given (trimmed), even when it is
	// unknown; it names a leaf of the tree only when Allocated.
	Budget string
	// MinRuntime is the parsed min_runtime (0 when absent or invalid).
	MinRuntime time.Duration
	// Protected is the protected window: min(MinRuntime, cap) when Allocated,
	// 0 otherwise.
	Protected time.Duration
	// Resumable says the job may be requeued after preemption; non-resumable
	// jobs are chosen as victims last.
	Resumable bool
	// Priority orders jobs of the same budget leaf only (0-100, default 50).
	Priority int
	// Signal and Notice are the checkpoint notice: before allot stops the
	// job (time slicing, a reservation, a drain) it sends Signal to every
	// task of the stopped allocations and waits Notice (at most
	// Config.MaxNotice). Both are set or neither: Notice is 0 and Signal ""
	// when the job declares no usable notice.
	Signal string
	Notice time.Duration
	// Session marks a restorable session (meta class = "session"): when
	// stopped past its window it waits ahead of its own budget's other
	// pending work. Only a job with a notice is a session.
	Session bool
	// Warnings explain every meta value that was ignored, clamped or invalid.
	Warnings []Warning
}

// Warning is one problem with a job's meta, with the job and key it concerns.
type Warning struct {
	Job   string // may be empty when the caller did not name the job
	Key   string // the meta key
	Value string // the value as given
	// Message says what was done and what would be valid.
	Message string
}

func (w Warning) String() string {
	var b strings.Builder
	if w.Job != "" {
		fmt.Fprintf(&b, "job %q: ", w.Job)
	}
	fmt.Fprintf(&b, "meta %s = %q: %s", w.Key, w.Value, w.Message)
	return b.String()
}

// Parse reads a job's contract from its meta. job names the job in warnings
// (may be empty). It never fails: every invalid value falls back to the safe
// default (unallocated, not resumable, priority 50) with a warning.
func Parse(job string, meta map[string]string, cfg Config, leaf LeafCheck) Contract {
	return ParseIn(job, meta, cfg, Budgets{Leaf: leaf})
}

// ParseIn is Parse against b, whose Nearest (when set) adds a did-you-mean
// to the warning about a budget the tree does not have.
func ParseIn(job string, meta map[string]string, cfg Config, b Budgets) Contract {
	c := Contract{Priority: DefaultPriority}
	warn := func(key, value, format string, args ...any) {
		c.Warnings = append(c.Warnings, Warning{Job: job, Key: key, Value: value, Message: fmt.Sprintf(format, args...)})
	}
	minRuntime := parseMinRuntime(meta, cfg.runtimeCap(), warn)
	c.MinRuntime = minRuntime
	c.Budget = strings.TrimSpace(meta[KeyBudget])
	if minRuntime > 0 && checkBudget(meta, c.Budget, b, warn) {
		c.Allocated = true
		c.Protected = min(minRuntime, cfg.runtimeCap())
	}
	c.Resumable = parseResumable(meta, warn)
	c.Priority = parsePriority(meta, warn)
	c.Signal, c.Notice = parseNotice(meta, cfg.maxNotice(), warn)
	c.Session = parseClass(meta, c.Notice > 0, warn)
	return c
}

type warnFunc func(key, value, format string, args ...any)

// parseMinRuntime returns the asked min_runtime, or 0 for unallocated.
func parseMinRuntime(meta map[string]string, limit time.Duration, warn warnFunc) time.Duration {
	raw, ok := meta[KeyMinRuntime]
	if !ok {
		return 0
	}
	s := strings.TrimSpace(raw)
	if s == "" {
		warn(KeyMinRuntime, raw, "empty; the job runs unallocated. Use a Go/Nomad duration such as \"90m\" or \"4h\", or \"0\" for unallocated work")
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		warn(KeyMinRuntime, raw, "not a duration; the job runs unallocated. Use a Go/Nomad duration such as \"90m\" or \"4h\" (at most %s), or \"0\" for unallocated work", limit)
		return 0
	}
	if d < 0 {
		warn(KeyMinRuntime, raw, "negative; the job runs unallocated. Use a duration between 0 and %s, such as \"90m\" or \"4h\"", limit)
		return 0
	}
	if d > limit {
		warn(KeyMinRuntime, raw, "above the cap of %s (the server's policy { runtime_cap }); the job is protected for %s only", limit, limit)
	}
	return d
}

// checkBudget reports whether the budget names a leaf, warning when not.
func checkBudget(meta map[string]string, budget string, b Budgets, warn warnFunc) bool {
	raw, given := meta[KeyBudget]
	switch {
	case !given || budget == "":
		warn(KeyBudget, raw, "min_runtime asks for allocated work but no budget is named; the job runs unallocated. Set meta budget to a leaf of the budget tree, e.g. \"lab/team/project\"")
		return false
	case b.Leaf == nil:
		warn(KeyBudget, raw, "no budget tree is loaded; the job runs unallocated until budget %q exists as a leaf", budget)
		return false
	}
	exists, isLeaf := b.Leaf(budget)
	switch {
	case !exists:
		hint := ""
		if b.Nearest != nil {
			if near := b.Nearest(budget); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
		}
		warn(KeyBudget, raw, "no such budget%s; the job runs unallocated. Name a leaf of the budget tree (`allot budgets list` lists them)", hint)
		return false
	case !isLeaf:
		warn(KeyBudget, raw, "budget %q has sub-budgets; the job runs unallocated. Name one of its leaves instead%s", budget, leavesHint(b, budget))
		return false
	}
	return true
}

// maxLeavesNamed bounds the leaves a warning lists, so a job naming the root
// of a large tree gets a line, not a page.
const maxLeavesNamed = 5

// leavesHint is ": a, b, c" (and "and N more") for the leaves below budget,
// "" when b cannot list them.
func leavesHint(b Budgets, budget string) string {
	if b.Under == nil {
		return ""
	}
	leaves := b.Under(budget)
	if len(leaves) == 0 {
		return ""
	}
	if len(leaves) > maxLeavesNamed {
		return fmt.Sprintf(": %s and %d more (`allot budgets list`)", strings.Join(leaves[:maxLeavesNamed], ", "), len(leaves)-maxLeavesNamed)
	}
	return ": " + strings.Join(leaves, ", ")
}

func parseResumable(meta map[string]string, warn warnFunc) bool {
	raw, ok := meta[KeyResumable]
	if !ok {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(raw)) {
	case "true", "1", "yes":
		return true
	case "false", "0", "no", "":
		return false
	}
	warn(KeyResumable, raw, "not a boolean; treated as false. Use true/false, 1/0 or yes/no")
	return false
}

func parsePriority(meta map[string]string, warn warnFunc) int {
	raw, ok := meta[KeyPriority]
	if !ok {
		return DefaultPriority
	}
	p, err := strconv.Atoi(strings.TrimSpace(raw))
	if err != nil || p < MinPriority || p > MaxPriority {
		warn(KeyPriority, raw, "not an integer from %d to %d; using %d", MinPriority, MaxPriority, DefaultPriority)
		return DefaultPriority
	}
	return p
}
