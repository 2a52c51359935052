package state

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// sampleNotice is a time-slicing notice to default/train's allocation a1.
func sampleNotice() Notice {
	return Notice{JobID: "default/train", For: "default/olmo", Allocs: []string{"a1"}, SentAt: t0, Deadline: t0.Add(5 * time.Minute),
		Stop: NoticeStop{Kind: "victim", Job: "default/olmo", Node: "n1", N: 8}}
}

// A pass records the notices in flight; a pass that does not replace them
// keeps them; they survive a snapshot and a restore; a job's deletion
// forgets its notice; a pass that replaces them with none clears them.
func TestPassRecordsNotices(t *testing.T) {
	f, req := passFixture(t)
	req.ReplaceNotices, req.Notices = true, []Notice{sampleNotice()}
	mustApply(t, f, PassType, req)
	got := f.Read().Notices()
	if len(got) != 1 || got[0].JobID != "default/train" || !got[0].Deadline.Equal(t0.Add(5*time.Minute)) || got[0].Stop.Kind != "victim" {
		t.Fatalf("notices after the pass %+v", got)
	}
	mustApply(t, f, PassType, PassRequest{At: req.At.Add(time.Second), ReplaceQueue: true})
	if len(f.Read().Notices()) != 1 {
		t.Fatalf("a pass that does not replace the notices dropped them")
	}
	snap := snapshotBytes(t, f)
	if !bytes.Contains(snap, []byte(`"Notices":[{"JobID":"default/train"`)) {
		t.Fatalf("the snapshot has no notices: %q", snap)
	}
	g := newFSM(t, FSMConfig{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(snapshotBytes(t, g), snap) {
		t.Fatalf("the restored state differs")
	}
	mustApply(t, g, JobDeleteType, JobDeleteRequest{JobIDs: []string{"default/train"}})
	if n := g.Read().Notices(); len(n) != 0 {
		t.Fatalf("notices after the job's deletion %+v, want none", n)
	}
	mustApply(t, f, PassType, PassRequest{At: req.At.Add(2 * time.Second), ReplaceNotices: true})
	if n := f.Read().Notices(); len(n) != 0 {
		t.Fatalf("notices after a pass that cleared them %+v", n)
	}
	if bytes.Contains(snapshotBytes(t, f), []byte("Notices")) {
		t.Fatalf("a state with no notice encodes them: snapshots written before notices must stay byte-identical")
	}
}

// badNotices are passes whose second notice is spoilt, each with the error
// naming it: TestPassAllOrNothing refuses them whole.
func badNotices() []passSpoil {
	var out []passSpoil
	for _, tc := range []struct {
		name  string
		spoil func(*Notice)
		want  string
	}{
		{"no job", func(n *Notice) { n.JobID = "" }, "notice 1 (job \"\"): no job ID"},
		{"no allocation", func(n *Notice) { n.Allocs = nil }, "0 allocations: want 1 to 4096"},
		{"an empty allocation ID", func(n *Notice) { n.Allocs = []string{"a1", ""} }, "allocation 1 has no ID"},
		{"a deadline before the signal", func(n *Notice) { n.Deadline = n.SentAt.Add(-time.Second) },
			"deadline 2026-03-02T08:59:59Z before it was sent at 2026-03-02T09:00:00Z"},
		{"an unknown stop", func(n *Notice) { n.Stop.Kind = "whim" },
			`stop kind "whim": want one of drain, drain_unallocated, nomad_drain, reservation, victim, victim_own, victim_partial`},
		{"a long node", func(n *Notice) { n.Stop.Node = strings.Repeat("n", MaxIDBytes+1) }, "stop.node is 257 bytes"},
		{"two for one job", func(n *Notice) { n.JobID = "default/train" }, `notice 1: a second notice for job "default/train"`},
	} {
		out = append(out, passSpoil{"a notice with " + tc.name, func(r *PassRequest) {
			bad := sampleNotice()
			bad.JobID = "default/olmo"
			tc.spoil(&bad)
			r.ReplaceNotices, r.Notices = true, []Notice{sampleNotice(), bad}
		}, tc.want})
	}
	return out
}

// A notice of every stop kind comes back from its row as it went in.
func TestNoticeRowRoundTrip(t *testing.T) {
	for code, kind := range noticeStopKinds {
		n := policy.Notice{Job: "default/train", For: "default/olmo", Allocs: []string{"a1", "a2"}, SentAt: t0, Deadline: t0.Add(time.Minute),
			Reason: policy.Reason{Code: code, Job: "default/olmo", Node: "n1", At: t0.Add(time.Hour), N: 8, Detail: "70 over 50"}}
		row, ok := NoticeRow(&n)
		if !ok || row.Stop.Kind != kind {
			t.Fatalf("%s: row %+v", kind, row)
		}
		back := row.Policy()
		if back.Job != n.Job || back.For != n.For || back.Reason != n.Reason || !back.SentAt.Equal(n.SentAt) ||
			!back.Deadline.Equal(n.Deadline) || strings.Join(back.Allocs, ",") != "a1,a2" {
			t.Fatalf("%s: %+v came back as %+v", kind, n, back)
		}
	}
	if _, ok := NoticeRow(&policy.Notice{Job: "x", Reason: policy.Reason{Code: policy.ReasonProtected}}); ok {
		t.Fatalf("a notice of a reason no stop has made a row")
	}
}
