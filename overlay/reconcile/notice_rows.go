package reconcile

import (
	"sort"

	"github.com/allot-sched/allot/overlay/policy"
	"github.com/allot-sched/allot/overlay/state"
)

// Checkpoint notices across leaders (docs/design.md, "Notice before a
// stop"). The replicated state is their one record: each pass records the
// plan's notices when they differ from the stored ones (noticeRows), in the
// same raft entry as the rest of the pass, and a leader starting its term
// fills its policy.Carry from them (noticesFromState). Within a term the
// Carry holds the same value (Carry.Remember keeps Plan.Notices whatever
// the signals' outcome), so a pass whose record failed records them again
// with the next one.

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
	old := in.view.Notices()
	if len(old) == len(rows) {
		same := true
		for i := range rows {
			same = same && sameRow(*old[i], rows[i])
		}
		if same {
			return nil
		}
	}
	return rows
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
