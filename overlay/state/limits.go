package state

import (
	"errors"
	"fmt"
	"time"

	"github.com/allot-sched/allot/budgets"
)

// Bounds on replicated input. The HTTP API refuses a request beyond them
// with a 400 that names the field; the FSM refuses the same items again, so
// that a log written by an older leader, or by a caller that skipped the
// API, cannot store them either.
const (
	// MaxIDBytes bounds an allocation ID in a charge. Nomad's are 36-byte UUIDs.
	MaxIDBytes = 256
	// MaxPathBytes bounds a budget path.
	MaxPathBytes = 512
	// MaxDescriptionBytes bounds a budget's description.
	MaxDescriptionBytes = 4096
	// MaxRevisionBytes bounds the revision of a budget apply (a git commit
	// is 40 hex digits, a SHA-256 digest 71 characters with its prefix).
	MaxRevisionBytes = 256
	// MaxOwners and MaxOwnerBytes bound a budget's owners list.
	MaxOwners     = 64
	MaxOwnerBytes = 256
	// MaxBudgets bounds the nodes of one budget tree.
	MaxBudgets = 10000
	// MaxDigests and MaxDigestBytes bound the file digests of a budget
	// apply (file name and digest each).
	MaxDigests     = 1024
	MaxDigestBytes = 256
	// MaxGPUs bounds the GPUs of one charge or demand sample: 2^20, above
	// any cluster's, and small enough that GPUs × seconds of any interval
	// the ledger keeps fits in an int64 many times over.
	MaxGPUs = 1 << 20
	// MaxNodeGPUs bounds the GPU instances listed on one node row: a DGX
	// or HGX host has 8, the largest single hosts 16 or 32; 64 leaves room.
	MaxNodeGPUs = 64
	// MaxGPUReasonBytes bounds a GPU's health description (allot-nvml's
	// are one line: an XID or ECC event with its time and GPU).
	MaxGPUReasonBytes = 1024
)

// Defaults for the ledger's time bounds (FSMConfig).
const (
	// DefaultMaxAdvance bounds how far one entry may move the ledger's
	// newest bucket (and with it the horizon): one hour, so one wrong
	// timestamp costs at most an hour of the oldest history, and a leader
	// back after an outage catches up an hour per reconcile pass.
	DefaultMaxAdvance = time.Hour
	// DefaultMaxSkew is how far after the leader's clock a charge or demand
	// sample may end: the leader charges up to its own now, and other
	// writers' clocks may run a little ahead of it.
	DefaultMaxSkew = time.Minute
)

// ErrOutOfBounds is wrapped by the errors of items beyond a bound.
var ErrOutOfBounds = errors.New("out of bounds")

func outOfBounds(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrOutOfBounds, fmt.Sprintf(format, args...))
}

// CheckSize returns an error naming field when s is longer than max bytes.
// It never echoes s: a caller may have sent megabytes.
func CheckSize(field, s string, max int) error {
	if len(s) > max {
		return outOfBounds("%s is %d bytes; at most %d are allowed", field, len(s), max)
	}
	return nil
}

// QuotePrefix quotes s, or its first 64 bytes when longer: errors name an
// item without echoing megabytes of it.
func QuotePrefix(s string) string {
	if len(s) <= 64 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:64], len(s))
}

// CheckGPUs returns an error naming field unless 0 <= gpus <= max.
func CheckGPUs(field string, gpus, max int) error {
	if gpus < 0 || gpus > max {
		return outOfBounds("%s = %d: want 0 to %d", field, gpus, max)
	}
	return nil
}

// TimeWindow is the range [From, To] that replicated timestamps must lie in.
type TimeWindow struct{ From, To time.Time }

// Check returns an error naming field when t lies outside w.
func (w TimeWindow) Check(field string, t time.Time) error {
	if t.Before(w.From) || t.After(w.To) {
		return outOfBounds("%s %s is outside [%s, %s]: the ledger's retention before the leader's clock to its allowed skew after it",
			field, t.UTC().Format(time.RFC3339), w.From.UTC().Format(time.RFC3339), w.To.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckInterval checks an interval [from, to) of a charge or demand sample
// named field: both ends in w, from not after to.
func (w TimeWindow) CheckInterval(field string, from, to time.Time) error {
	if err := w.Check(field+".from", from); err != nil {
		return err
	}
	if err := w.Check(field+".to", to); err != nil {
		return err
	}
	if to.Before(from) {
		return outOfBounds("%s: to %s is before from %s", field, to.UTC().Format(time.RFC3339), from.UTC().Format(time.RFC3339))
	}
	return nil
}

// CheckBudgetsApply checks the sizes of a budget apply, naming the field of
// the API request ("budgets[3].description"). It does not check the tree
// itself: budgets.NewTree does.
func CheckBudgetsApply(req *BudgetsApplyRequest) error {
	var errs []error
	add := func(err error) {
		if err != nil && len(errs) < 10 {
			errs = append(errs, err)
		}
	}
	add(CheckSize("revision", req.Revision, MaxRevisionBytes))
	if len(req.Digests) > MaxDigests {
		add(outOfBounds("digests has %d entries; at most %d are allowed", len(req.Digests), MaxDigests))
	}
	for name, d := range req.Digests {
		add(CheckSize("a digests key", name, MaxDigestBytes))
		add(CheckSize("digests value", d, MaxDigestBytes))
	}
	if len(req.Specs) > MaxBudgets {
		add(outOfBounds("budgets has %d entries; at most %d are allowed", len(req.Specs), MaxBudgets))
		return errors.Join(errs...)
	}
	for i, s := range req.Specs {
		add(checkSpec(i, s))
	}
	return errors.Join(errs...)
}

func checkSpec(i int, s budgets.Spec) error {
	field := func(f string) string { return fmt.Sprintf("budgets[%d].%s", i, f) }
	if err := CheckSize(field("path"), s.Path, MaxPathBytes); err != nil {
		return err
	}
	if err := CheckSize(field("description"), s.Description, MaxDescriptionBytes); err != nil {
		return err
	}
	if len(s.Owners) > MaxOwners {
		return outOfBounds("%s has %d entries; at most %d are allowed", field("owners"), len(s.Owners), MaxOwners)
	}
	for k, o := range s.Owners {
		if err := CheckSize(fmt.Sprintf("%s[%d]", field("owners"), k), o, MaxOwnerBytes); err != nil {
			return err
		}
	}
	return nil
}

// CheckNodeGPUs checks the GPU list of node row i against MaxNodeGPUs,
// MaxIDBytes (ID and model) and MaxGPUReasonBytes.
func CheckNodeGPUs(i int, n *Node) error {
	f := fmt.Sprintf("nodes[%d].gpus", i)
	if len(n.GPUs) > MaxNodeGPUs {
		return outOfBounds("%s has %d GPUs; at most %d are allowed", f, len(n.GPUs), MaxNodeGPUs)
	}
	for j, g := range n.GPUs {
		p := fmt.Sprintf("%s[%d]", f, j)
		for _, err := range []error{CheckSize(p+".id", g.ID, MaxIDBytes),
			CheckSize(p+".model", g.Model, MaxIDBytes), CheckSize(p+".reason", g.Reason, MaxGPUReasonBytes)} {
			if err != nil {
				return err
			}
		}
	}
	return nil
}
