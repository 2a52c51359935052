package reconcile

import (
	"sort"

	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// Checkpoint notices and held victims across leaders (docs/design.md,
// "Notice before a stop", its leader-change paragraph). The replicated state is
// their one record: each pass records the plan's notices and the victims
// held below the job they made room for when they differ from the stored
// ones (noticeRows, heldVictimRows), in the same raft entry as the rest of
// the pass, and a leader starting its term fills its policy.Carry from them
// (noticesFromState, heldVictimsFromState). Within a term the Carry holds
// the same values (Carry.Remember keeps Plan.Notices whatever the signals'
// outcome, and Plan.Victims less those whose stop failed, which are what
// is recorded), so a pass whose record failed records them again with the
// next one.

// noticeRows are the plan's notices when they differ from the stored ones
// (nil keeps the stored ones; an empty, non-nil slice clears them).
func noticeRows(in rowsInput) []state.Notice {
	rows := make([]state.Notice, 0, len(in.plan.Notices))
	for i := range in.plan.Notices {
		if row, ok := state.NoticeRow(&in.plan.Notices[i]); ok {
			rows = append(rows, row)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].JobID < rows[j].JobID })
	return changedRows(rows, in.view.Notices())
}

// heldVictimRows are the victims held after the pass (Carry.Victims) when
// they differ from the stored ones (nil keeps them; empty clears them). A
// victim is held once, below the first job it is listed for (as the
// policy's keepVictims reads them).
func heldVictimRows(in rowsInput) []state.HeldVictim {
	rows := make([]state.HeldVictim, 0, len(in.held))
	seen := make(map[string]bool, len(in.held))
	for i := range in.held {
		if v := &in.held[i]; !seen[v.Job] {
			seen[v.Job] = true
			rows = append(rows, state.HeldVictimRow(v))
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].JobID < rows[j].JobID })
	return changedRows(rows, in.view.HeldVictims())
}

// changedRows is rows, or nil when the stored rows old (in the same order)
// are the same.
func changedRows[T any](rows []T, old []*T) []T {
	if len(old) != len(rows) {
		return rows
	}
	for i := range rows {
		if !sameRow(*old[i], rows[i]) {
			return rows
		}
	}
	return nil
}

// noticesFromState is the notices in flight as the replicated state holds
// them, for a leader that has no memory of its own: it neither signals
// their jobs again nor stops them before their deadlines, and the jobs
// they make room for keep waiting for them.
func noticesFromState(v *state.View) []policy.Notice {
	var out []policy.Notice
	for _, n := range v.Notices() {
		out = append(out, n.Policy())
	}
	return out
}

// heldVictimsFromState is the victims held as the replicated state holds
// them, for a leader that has no memory of its own: it keeps each one below
// the job it made room for (a replacement Nomad placed first is not raised
// over it) until that job places or the hold runs out.
func heldVictimsFromState(v *state.View) []policy.Victim {
	var out []policy.Victim
	for _, h := range v.HeldVictims() {
		out = append(out, h.Policy())
	}
	return out
}
