package budgets

import (
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		got   string
		valid []string
		want  string
	}{
		{"one letter dropped", "shre", []string{"description", "owners", "share"}, "share"},
		{"two letters swapped", "vidoe", []string{"video", "vision"}, "video"},
		{"three edits is too far", "abcdef", []string{"abcxyz"}, ""},
		{"the first of equally close ones", "ab", []string{"ax", "ay"}, "ax"},
		{"a short name takes half its length in edits", "frob", []string{"job"}, ""},
		{"one edit to a short name", "jbo", []string{"job"}, ""},
		{"one edit to a three-letter name", "jobs", []string{"job"}, "job"},
		{"nothing to choose from", "x", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Nearest(tc.got, tc.valid); got != tc.want {
				t.Errorf("Nearest(%q, %q) = %q, want %q", tc.got, tc.valid, got, tc.want)
			}
		})
	}
}

func TestNearestLeaf(t *testing.T) {
	tr := publishedTree(t)
	for got, want := range map[string]string{
		"ai2/prior/vison":  "ai2/prior/vision",
		"ai2/robotic":      "ai2/robotics",
		"ai2/prio":         "", // a non-leaf is never suggested, and no leaf is within two edits
		"lab/other/thing":  "",
		"ai2/prior/olmo/x": "ai2/prior/olmo",
	} {
		if l := tr.NearestLeaf(got); l != want {
			t.Errorf("NearestLeaf(%q) = %q, want %q", got, l, want)
		}
	}
}

func TestLeavesUnder(t *testing.T) {
	tr := publishedTree(t)
	for path, want := range map[string]string{
		"ai2":            "ai2/prior/olmo ai2/prior/vision ai2/robotics",
		"ai2/prior":      "ai2/prior/olmo ai2/prior/vision",
		"ai2/robotics":   "", // a leaf
		"ai2/pri":        "", // not in the tree (and not a prefix match)
		"ai2/prior/olmo": "",
	} {
		if got := strings.Join(tr.LeavesUnder(path), " "); got != want {
			t.Errorf("LeavesUnder(%q) = %q, want %q", path, got, want)
		}
	}
}
