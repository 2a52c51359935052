package state

import (
	"fmt"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
	memdb "github.com/hashicorp/go-memdb"
)

// Victims held below the job they made room for (policy.Victim;
// docs/design.md, "Notice before a stop", its leader-change paragraph).
// The leader records them with the pass that chose or released them
// (PassRequest.HeldVictims), as it records checkpoint notices (notice.go),
// so that the next leader, after a leader change or a restart, keeps
// holding each one below its job until that job places or the hold runs
// out, instead of raising a replacement Nomad placed first to its own
// level (which the waiting job can then no longer preempt).

// TableHeldVictims holds one HeldVictim per victim job.
const TableHeldVictims = "held_victims"

// HeldVictim is victim JobID held below For since Since (when it was chosen:
// the hold ends at Since + the policy's VictimHold). For == JobID is a gang
// released by rule 5c, held a preemption gap below its own standing so
// that its replacement cannot take its GPUs straight back (policy
// recordVictims). Replaced is when For was evaluated with the victim's
// replacement live, and Kept says that replacement outlasted the
// evaluation: the victim is no longer held (policy.Victim), so a new
// leader neither holds it again at a pending level, where Nomad could
// preempt a job that has just started, nor evaluates For for it again.
type HeldVictim struct {
	JobID    string
	For      string
	Since    time.Time
	Replaced time.Time `json:",omitzero"`
	Kept     bool      `json:",omitempty"`
}

// HeldVictimRow is the replicated row of a policy victim.
func HeldVictimRow(v *policy.Victim) HeldVictim {
	return HeldVictim{JobID: v.Job, For: v.For, Since: v.Since.UTC(), Replaced: v.Replaced.UTC(), Kept: v.Kept}
}

// Policy is the row as the policy's victim (what a new leader's
// policy.Carry starts from).
func (h *HeldVictim) Policy() policy.Victim {
	return policy.Victim{Job: h.JobID, For: h.For, Since: h.Since, Replaced: h.Replaced, Kept: h.Kept}
}

func heldVictimsTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableHeldVictims, Indexes: map[string]*memdb.IndexSchema{
		"id":  idIndex("JobID"),
		"for": {Name: "for", Indexer: &memdb.StringFieldIndex{Field: "For"}},
	}}
}

// HeldVictims returns the victims held, by victim job ID.
func (v *View) HeldVictims() []*HeldVictim { return all[HeldVictim](v, TableHeldVictims) }

// replaceHeldVictims replaces the stored held victims with hs, refusing
// the entry for the first invalid one.
func replaceHeldVictims(txn *memdb.Txn, hs []HeldVictim) error {
	return replaceByJob(txn, TableHeldVictims, "held victim", hs, func(h *HeldVictim) (string, error) {
		h.Since, h.Replaced = h.Since.UTC(), h.Replaced.UTC() // the zero time stays zero
		return h.JobID, checkHeldVictim(h)
	})
}

// checkHeldVictim checks a held victim row before it is stored.
func checkHeldVictim(h *HeldVictim) error {
	switch {
	case h.JobID == "":
		return fmt.Errorf("no job ID")
	case h.For == "":
		return fmt.Errorf("no job it is held for: want the waiting job's ID")
	case h.Since.IsZero():
		return fmt.Errorf("no time it was chosen (since)")
	case h.Kept && h.Replaced.IsZero():
		return fmt.Errorf("kept without the time its job was evaluated with it live (replaced)")
	case !h.Replaced.IsZero() && h.Replaced.Before(h.Since):
		return fmt.Errorf("replaced %s before it was chosen (since %s)", h.Replaced.Format(time.RFC3339), h.Since.Format(time.RFC3339))
	}
	for _, f := range []struct{ field, s string }{{"job", h.JobID}, {"for", h.For}} {
		if err := CheckSize(f.field, f.s, MaxIDBytes); err != nil {
			return err
		}
	}
	return nil
}
