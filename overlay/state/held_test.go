package state

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
)

// sampleHeld are default/train held below default/olmo and default/eval
// below default/train.
func sampleHeld() []HeldVictim {
	return []HeldVictim{{JobID: "default/eval", For: "default/train", Since: t0}, {JobID: "default/train", For: "default/olmo", Since: t0}}
}

// A pass records the held victims; a pass that does not replace them keeps
// them; they survive a snapshot and a restore; a job's deletion forgets its
// hold as a victim and the holds of the victims held for it; a pass that
// replaces them with none clears them, and the snapshot encodes as before.
func TestPassRecordsHeldVictims(t *testing.T) {
	f, req := passFixture(t)
	req.ReplaceHeldVictims, req.HeldVictims = true, sampleHeld()
	mustApply(t, f, PassType, req)
	if got := f.Read().HeldVictims(); len(got) != 2 || got[1].JobID != "default/train" || got[1].For != "default/olmo" || !got[1].Since.Equal(t0) {
		t.Fatalf("held victims after the pass %+v", got)
	}
	mustApply(t, f, PassType, PassRequest{At: req.At.Add(time.Second), ReplaceQueue: true})
	if len(f.Read().HeldVictims()) != 2 {
		t.Fatalf("a pass that does not replace the held victims dropped them")
	}
	snap := snapshotBytes(t, f)
	if !bytes.Contains(snap, []byte(`"HeldVictims":[{"JobID":"default/eval","For":"default/train"`)) {
		t.Fatalf("the snapshot has no held victims: %q", snap)
	}
	for _, tc := range []struct {
		deleted string
		left    int
	}{{"default/eval", 1}, {"default/olmo", 1}, {"default/train", 0}} {
		g := newFSM(t, FSMConfig{})
		if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(snapshotBytes(t, g), snap) {
			t.Fatalf("the restored state differs")
		}
		mustApply(t, g, JobDeleteType, JobDeleteRequest{JobIDs: []string{tc.deleted}})
		got := g.Read().HeldVictims()
		if len(got) != tc.left {
			t.Fatalf("held victims after %s's deletion %+v, want %d", tc.deleted, got, tc.left)
		}
		for _, h := range got {
			if h.JobID == tc.deleted || h.For == tc.deleted {
				t.Fatalf("held victims after %s's deletion %+v still name it", tc.deleted, got)
			}
		}
	}
	mustApply(t, f, PassType, PassRequest{At: req.At.Add(2 * time.Second), ReplaceHeldVictims: true})
	if h := f.Read().HeldVictims(); len(h) != 0 {
		t.Fatalf("held victims after a pass that cleared them %+v", h)
	}
	if bytes.Contains(snapshotBytes(t, f), []byte("HeldVictims")) {
		t.Fatalf("a state with no held victim encodes them: snapshots written before they were replicated must stay byte-identical")
	}
}

// A gang released by rule 5c is held below its own standing (policy
// recordVictims: For is the job itself): the pass that releases it is
// recorded, not refused whole, and the hold survives for the next leader.
func TestPassRecordsARelease(t *testing.T) {
	f, req := passFixture(t)
	req.ReplaceHeldVictims, req.HeldVictims = true, []HeldVictim{{JobID: "default/train", For: "default/train", Since: t0}}
	mustApply(t, f, PassType, req)
	if got := f.Read().HeldVictims(); len(got) != 1 || got[0].JobID != "default/train" || got[0].For != "default/train" {
		t.Fatalf("held victims after a pass that released default/train %+v", got)
	}
}

// badHeldVictims are passes whose second held victim is spoilt, each with
// the error naming it: TestPassAllOrNothing refuses them whole.
func badHeldVictims() []passSpoil {
	var out []passSpoil
	for _, tc := range []struct {
		name  string
		spoil func(*HeldVictim)
		want  string
	}{
		{"no job", func(h *HeldVictim) { h.JobID = "" }, `held victim 1 (job ""): no job ID`},
		{"no job held for", func(h *HeldVictim) { h.For = "" }, `held victim 1 (job "default/train"): no job it is held for`},
		{"no time chosen", func(h *HeldVictim) { h.Since = time.Time{} }, "no time it was chosen (since)"},
		{"kept but never evaluated", func(h *HeldVictim) { h.Kept = true }, "kept without the time its job was evaluated with it live (replaced)"},
		{"replaced before chosen", func(h *HeldVictim) { h.Replaced = h.Since.Add(-time.Second) }, "replaced 2026-"},
		{"a long beneficiary", func(h *HeldVictim) { h.For = strings.Repeat("j", MaxIDBytes+1) }, "for is 257 bytes"},
		{"a victim held twice", func(h *HeldVictim) { h.JobID = "default/eval" },
			`held victim 1: a second held victim for job "default/eval" (one per job)`},
	} {
		out = append(out, passSpoil{"a held victim with " + tc.name, func(r *PassRequest) {
			r.ReplaceHeldVictims, r.HeldVictims = true, sampleHeld()
			tc.spoil(&r.HeldVictims[1])
		}, tc.want})
	}
	return out
}

// A held victim comes back from its row as it went in, in UTC, with when
// its job was evaluated with it live and whether it was kept.
func TestHeldVictimRowRoundTrip(t *testing.T) {
	zone := time.FixedZone("x", 3600)
	for _, v := range []policy.Victim{
		{Job: "default/train", For: "default/olmo", Since: t0.In(zone)},
		{Job: "default/train", For: "default/olmo", Since: t0.In(zone), Replaced: t0.Add(time.Minute).In(zone), Kept: true},
	} {
		row := HeldVictimRow(&v)
		if row.Since.Location() != time.UTC || !v.Replaced.IsZero() && row.Replaced.Location() != time.UTC {
			t.Fatalf("row's since %s, replaced %s, want UTC", row.Since, row.Replaced)
		}
		back := row.Policy()
		if back.Job != v.Job || back.For != v.For || !back.Since.Equal(v.Since) || !back.Replaced.Equal(v.Replaced) || back.Kept != v.Kept {
			t.Fatalf("%+v came back as %+v", v, back)
		}
	}
}

// A kept victim's row is stored and read back whole, so a new leader
// does not hold it again.
func TestHeldVictimKeptStored(t *testing.T) {
	f, req := passFixture(t)
	req.ReplaceHeldVictims, req.HeldVictims = true, []HeldVictim{
		{JobID: "default/eval", For: "default/train", Since: t0, Replaced: t0.Add(30 * time.Second), Kept: true}}
	mustApply(t, f, PassType, req)
	got := f.Read().HeldVictims()
	if len(got) != 1 || !got[0].Kept || !got[0].Replaced.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("stored %+v", got)
	}
}
