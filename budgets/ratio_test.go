package budgets

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestRatioJSON(t *testing.T) {
	for _, tc := range []struct {
		r    Ratio
		want string
	}{
		{0.25, "0.25"}, {1, "1"}, {1e21, "1e+21"}, {Ratio(math.Inf(1)), `"inf"`}, {Ratio(math.Inf(-1)), `"-inf"`}, {Ratio(math.NaN()), "null"},
	} {
		b, err := json.Marshal(tc.r)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", float64(tc.r), b, err, tc.want)
			continue
		}
		var back Ratio
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != tc.r && !(math.IsNaN(float64(back)) && math.IsNaN(float64(tc.r))) {
			t.Errorf("%s decoded as %v, want %v", b, float64(back), float64(tc.r))
		}
	}
	var r Ratio
	if err := json.Unmarshal([]byte(`"infinity"`), &r); err == nil || !strings.Contains(err.Error(), `"inf"`) {
		t.Errorf(`"infinity" decoded: %v, want an error naming the valid forms`, err)
	}
}

// A leaf whose sibling used nothing has Level +Inf at that level; its
// standing must still encode (encoding/json refuses +Inf in a float64).
func TestLeafRankJSONWithZeroUsageSibling(t *testing.T) {
	tr, err := NewTree([]Spec{{Path: "lab", Share: 1}, {Path: "lab/a", Share: 1}, {Path: "lab/b", Share: 3}})
	if err != nil {
		t.Fatal(err)
	}
	usage := make([]int64, tr.Len())
	a, _ := tr.Lookup("lab/a")
	usage[a.LeafIndex] = 3600
	fs := ComputeFairShare(tr, usage)
	var b *LeafRank
	for i := range fs.Leaves {
		if fs.Leaves[i].Leaf.Path == "lab/b" {
			b = &fs.Leaves[i]
		}
	}
	if b == nil || !math.IsInf(b.Parts[len(b.Parts)-1].Level, 1) {
		t.Fatalf("setup: lab/b standing %+v, want Level +Inf at its own level", b)
	}
	if _, err := json.Marshal(b.Parts[len(b.Parts)-1].Level); err == nil {
		t.Fatal("encoding/json accepted +Inf in a float64; the Ratio type would be pointless")
	}
	out, err := json.Marshal(fs.Leaves)
	if err != nil {
		t.Fatalf("standing of every leaf: %v", err)
	}
	for _, want := range []string{`"leaf":"lab/b"`, `"level":"inf"`, `"path":"lab/a"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s does not contain %s", out, want)
		}
	}
	var parts []LevelPart
	if err := json.Unmarshal([]byte(`[{"path":"lab/b","share":0.75,"usage_fraction":0,"level":"inf"}]`), &parts); err != nil ||
		!math.IsInf(parts[0].Level, 1) || parts[0].Share != 0.75 {
		t.Errorf("decoded parts %+v, %v; want lab/b with Level +Inf", parts, err)
	}
}
