package faults

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const gpu = "GPU-0b0e6c2a-1111-2222-3333-444455556666"

func TestInjectAndClear(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	for _, cmd := range [][]string{
		{"xid", "79", gpu}, {"ecc", "2", gpu}, {"remap", "pending", gpu}, {"retired", gpu}, {"lost", gpu}, {"xid", "48", gpu},
	} {
		if err := Inject(dir, cmd, now); err != nil {
			t.Fatalf("inject %v: %v", cmd, err)
		}
	}
	got, err := Load(dir, gpu)
	if err != nil {
		t.Fatal(err)
	}
	want := State{
		XIDs:                []XID{{79, now}, {48, now}},
		UncorrectedECC:      2,
		RowRemapPending:     true,
		RetiredPagesPending: true,
		Lost:                true,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("state (-want +got):\n%s", d)
	}
	if err := Inject(dir, []string{"clear"}, now); err != nil {
		t.Fatal(err)
	}
	got, _ = Load(dir, gpu)
	if d := cmp.Diff(State{Resets: 1}, got); d != "" {
		t.Fatalf("after clear (-want +got):\n%s", d)
	}
}

func TestLoadMissingIsClean(t *testing.T) {
	s, err := Load(t.TempDir(), gpu)
	if err != nil || !cmp.Equal(s, State{}) {
		t.Fatalf("Load = %+v, %v", s, err)
	}
}

func TestInjectRejects(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no command", nil, "want one of"},
		{"unknown command", []string{"melt", gpu}, "want one of"},
		{"non-numeric XID", []string{"xid", "x", gpu}, `xid "x": want a non-negative integer`},
		{"zero ECC", []string{"ecc", "0", gpu}, `ecc "0": want a positive integer`},
		{"not a UUID", []string{"lost", "../etc"}, "is not a GPU UUID"},
		{"bad remap kind", []string{"remap", "soon", gpu}, "want one of"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Inject(t.TempDir(), tc.args, time.Now())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
