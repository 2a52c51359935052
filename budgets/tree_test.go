package budgets

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func publishedTree(t *testing.T) *Tree {
	t.Helper()
	tr, err := NewTree([]Spec{
		{Path: "ai2"},
		{Path: "ai2/prior", Share: 50},
		{Path: "ai2/prior/olmo", Share: 70},
		{Path: "ai2/prior/vision", Share: 30},
		{Path: "ai2/robotics", Share: 50},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestEffectiveShares(t *testing.T) {
	tr := publishedTree(t)
	want := map[string]float64{"ai2": 1, "ai2/prior": 0.5, "ai2/prior/olmo": 0.35, "ai2/prior/vision": 0.15, "ai2/robotics": 0.5}
	for p, w := range want {
		n, ok := tr.Lookup(p)
		if !ok {
			t.Fatalf("missing %s", p)
		}
		if math.Abs(n.Effective-w) > 1e-12 {
			t.Errorf("%s effective = %v, want %v", p, n.Effective, w)
		}
	}
	var leaves []string
	for i, l := range tr.Leaves() {
		if l.LeafIndex != i {
			t.Errorf("leaf %s index %d, want %d", l.Path, l.LeafIndex, i)
		}
		leaves = append(leaves, l.Path)
	}
	if got := strings.Join(leaves, ","); got != "ai2/prior/olmo,ai2/prior/vision,ai2/robotics" {
		t.Errorf("leaves = %s", got)
	}
	if !tr.IsLeaf("ai2/robotics") || tr.IsLeaf("ai2/prior") || tr.IsLeaf("nope") {
		t.Error("IsLeaf wrong")
	}
}

func TestNewTreeErrors(t *testing.T) {
	cases := []struct {
		name  string
		specs []Spec
		want  []string
	}{
		{"no root", nil, []string{"no root budget"}},
		{"two roots", []Spec{{Path: "a", Pos: "a.hcl:1:1"}, {Path: "b", Pos: "b.hcl:1:1"}}, []string{"b.hcl:1:1", "second root"}},
		{"bad name", []Spec{{Path: "a"}, {Path: "a/B c", Share: 1, Pos: "x.hcl:3:3"}}, []string{"x.hcl:3:3", `name "B c"`}},
		{"duplicate", []Spec{{Path: "a", Pos: "x:1:1"}, {Path: "a/b", Share: 1, Pos: "x:2:1"}, {Path: "a/b", Share: 1, Pos: "y:5:1"}},
			[]string{"y:5:1", "declared twice", "first declared at x:2:1"}},
		{"zero share", []Spec{{Path: "a"}, {Path: "a/b", Share: 0, Pos: "x:2:1"}}, []string{"x:2:1", "positive finite"}},
		{"nan share", []Spec{{Path: "a"}, {Path: "a/b", Share: math.NaN()}}, []string{"positive finite"}},
		{"orphan", []Spec{{Path: "a"}, {Path: "a/x/y", Share: 1, Pos: "z:9:2"}}, []string{"z:9:2", `attached to "a/x"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewTree(c.specs)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalidTree) {
				t.Errorf("error does not wrap ErrInvalidTree: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNewTreeReportsAllErrors(t *testing.T) {
	_, err := NewTree([]Spec{{Path: "a"}, {Path: "a/b", Share: -1}, {Path: "a/C", Share: 1}, {Path: "a/q/r", Share: 1}})
	if err == nil {
		t.Fatal("no error")
	}
	if n := strings.Count(err.Error(), ErrInvalidTree.Error()); n != 3 {
		t.Errorf("got %d errors, want 3: %v", n, err)
	}
}
