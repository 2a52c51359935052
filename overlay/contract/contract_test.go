package contract

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// tree is the budget tree the tests check against: lab/a and lab/b are
// leaves, lab is not.
func tree(path string) (exists, leaf bool) {
	switch path {
	case "lab/a", "lab/b":
		return true, true
	case "lab":
		return true, false
	}
	return false, false
}

func TestParse(t *testing.T) {
	tests := []struct {
		name         string
		meta         map[string]string
		cfg          Config
		leaf         LeafCheck
		want         Contract
		wantWarnKeys []string
		wantWarnText []string // substrings, one per warning
	}{
		{
			name: "no meta is unallocated without warnings",
			meta: nil,
			want: Contract{Priority: 50},
		},
		{
			name: "a budget and min_runtime make an allocated job",
			meta: map[string]string{"budget": "lab/a", "min_runtime": "4h", "resumable": "true", "priority": "70"},
			want: Contract{Allocated: true, Budget: "lab/a", MinRuntime: 4 * time.Hour, Protected: 4 * time.Hour, Resumable: true, Priority: 70},
		},
		{
			name: "min_runtime 0 is unallocated and a budget alone does not warn",
			meta: map[string]string{"budget": "lab/a", "min_runtime": "0"},
			want: Contract{Budget: "lab/a", Priority: 50},
		},
		{
			name: "min_runtime 0s is unallocated",
			meta: map[string]string{"budget": "lab/a", "min_runtime": "0s"},
			want: Contract{Budget: "lab/a", Priority: 50},
		},
		{
			name:         "min_runtime above the default cap is clamped to 8h with a warning",
			meta:         map[string]string{"budget": "lab/a", "min_runtime": "12h"},
			want:         Contract{Allocated: true, Budget: "lab/a", MinRuntime: 12 * time.Hour, Protected: 8 * time.Hour, Priority: 50},
			wantWarnKeys: []string{"min_runtime"},
			wantWarnText: []string{"above the cap of 8h0m0s"},
		},
		{
			name:         "a configured cap is used",
			meta:         map[string]string{"budget": "lab/a", "min_runtime": "3h"},
			cfg:          Config{RuntimeCap: 2 * time.Hour},
			want:         Contract{Allocated: true, Budget: "lab/a", MinRuntime: 3 * time.Hour, Protected: 2 * time.Hour, Priority: 50},
			wantWarnKeys: []string{"min_runtime"},
			wantWarnText: []string{"protected for 2h0m0s only"},
		},
		{
			name:         "a negative min_runtime is unallocated and says what is valid",
			meta:         map[string]string{"budget": "lab/a", "min_runtime": "-1h"},
			want:         Contract{Budget: "lab/a", Priority: 50},
			wantWarnKeys: []string{"min_runtime"},
			wantWarnText: []string{`"-1h": negative; the job runs unallocated. Use a duration between 0 and 8h0m0s`},
		},
		{
			name:         "an unparsable min_runtime is unallocated and quotes the value",
			meta:         map[string]string{"budget": "lab/a", "min_runtime": "four hours"},
			want:         Contract{Budget: "lab/a", Priority: 50},
			wantWarnKeys: []string{"min_runtime"},
			wantWarnText: []string{`"four hours": not a duration`},
		},
		{
			name:         "an empty min_runtime warns",
			meta:         map[string]string{"budget": "lab/a", "min_runtime": " "},
			want:         Contract{Budget: "lab/a", Priority: 50},
			wantWarnKeys: []string{"min_runtime"},
			wantWarnText: []string{"empty"},
		},
		{
			name:         "min_runtime without a budget warns about the budget",
			meta:         map[string]string{"min_runtime": "2h"},
			want:         Contract{MinRuntime: 2 * time.Hour, Priority: 50},
			wantWarnKeys: []string{"budget"},
			wantWarnText: []string{"no budget is named"},
		},
		{
			name:         "an unknown budget is unallocated",
			meta:         map[string]string{"budget": "lab/zz", "min_runtime": "2h"},
			want:         Contract{Budget: "lab/zz", MinRuntime: 2 * time.Hour, Priority: 50},
			wantWarnKeys: []string{"budget"},
			wantWarnText: []string{`"lab/zz": no such budget`},
		},
		{
			name:         "a non-leaf budget is unallocated",
			meta:         map[string]string{"budget": "lab", "min_runtime": "2h"},
			want:         Contract{Budget: "lab", MinRuntime: 2 * time.Hour, Priority: 50},
			wantWarnKeys: []string{"budget"},
			wantWarnText: []string{"has sub-budgets"},
		},
		{
			name:         "without a budget tree every budget is unknown",
			meta:         map[string]string{"budget": "lab/a", "min_runtime": "2h"},
			leaf:         func(string) (bool, bool) { return false, false },
			want:         Contract{Budget: "lab/a", MinRuntime: 2 * time.Hour, Priority: 50},
			wantWarnKeys: []string{"budget"},
		},
		{
			name: "resumable accepts Nomad-style spellings in any case",
			meta: map[string]string{"resumable": " YES "},
			want: Contract{Resumable: true, Priority: 50},
		},
		{
			name: "resumable 0 is false",
			meta: map[string]string{"resumable": "0"},
			want: Contract{Priority: 50},
		},
		{
			name:         "a bad resumable is false with a warning",
			meta:         map[string]string{"resumable": "maybe"},
			want:         Contract{Priority: 50},
			wantWarnKeys: []string{"resumable"},
			wantWarnText: []string{"Use true/false, 1/0 or yes/no"},
		},
		{
			name:         "a priority above 100 falls back to 50",
			meta:         map[string]string{"priority": "101"},
			want:         Contract{Priority: 50},
			wantWarnKeys: []string{"priority"},
			wantWarnText: []string{"not an integer from 0 to 100; using 50"},
		},
		{
			name:         "a non-numeric priority falls back to 50",
			meta:         map[string]string{"priority": "high"},
			want:         Contract{Priority: 50},
			wantWarnKeys: []string{"priority"},
		},
		{
			name: "priority 0 and 100 are valid",
			meta: map[string]string{"priority": "0"},
			want: Contract{Priority: 0},
		},
		{
			name:         "every problem is reported",
			meta:         map[string]string{"budget": "nope", "min_runtime": "1h", "resumable": "perhaps", "priority": "-3"},
			want:         Contract{Budget: "nope", MinRuntime: time.Hour, Priority: 50},
			wantWarnKeys: []string{"budget", "resumable", "priority"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			leaf := tt.leaf
			if leaf == nil {
				leaf = tree
			}
			got := Parse("train", tt.meta, tt.cfg, leaf)
			warnings := got.Warnings
			got.Warnings = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse() = %+v, want %+v", got, tt.want)
			}
			var keys []string
			for _, w := range warnings {
				keys = append(keys, w.Key)
				if w.Job != "train" {
					t.Errorf("warning %q does not name the job", w)
				}
				if !strings.HasPrefix(w.String(), `job "train": meta `+w.Key+" = ") {
					t.Errorf("warning %q does not start with the job and key", w)
				}
			}
			if !reflect.DeepEqual(keys, tt.wantWarnKeys) {
				t.Errorf("warning keys = %v, want %v (warnings: %v)", keys, tt.wantWarnKeys, warnings)
			}
			for i, sub := range tt.wantWarnText {
				if i >= len(warnings) || !strings.Contains(warnings[i].String(), sub) {
					t.Errorf("warning %d = %v, want it to contain %q", i, warnings, sub)
				}
			}
		})
	}
}

func TestParseNilLeafCheck(t *testing.T) {
	got := Parse("", map[string]string{"budget": "lab/a", "min_runtime": "1h"}, Config{}, nil)
	if got.Allocated || len(got.Warnings) != 1 || !strings.Contains(got.Warnings[0].Message, "no budget tree is loaded") {
		t.Fatalf("Parse with nil LeafCheck = %+v, want unallocated with a 'no budget tree' warning", got)
	}
	if strings.HasPrefix(got.Warnings[0].String(), "job ") {
		t.Errorf("warning %q names a job although none was given", got.Warnings[0])
	}
}

// TestParseInSuggestsLeaf: a misspelt budget gets the leaf it likely meant,
// and a budget nothing is close to gets the pointer to the list alone.
func TestParseInSuggestsLeaf(t *testing.T) {
	b := Budgets{Leaf: tree, Nearest: func(p string) string {
		if p == "lab/aa" {
			return "lab/a"
		}
		return ""
	}}
	for _, tc := range []struct{ budget, want, wantNot string }{
		{"lab/aa", `job "j": meta budget = "lab/aa": no such budget (did you mean "lab/a"?); the job runs unallocated. ` +
			"Name a leaf of the budget tree (`allot budgets list` lists them)", ""},
		{"other/x", `meta budget = "other/x": no such budget; the job runs unallocated.`, "did you mean"},
	} {
		c := ParseIn("j", map[string]string{"budget": tc.budget, "min_runtime": "1h"}, Config{}, b)
		if c.Allocated || len(c.Warnings) != 1 {
			t.Fatalf("%s: %+v, want unallocated with one warning", tc.budget, c)
		}
		got := c.Warnings[0].String()
		if !strings.Contains(got, tc.want) || (tc.wantNot != "" && strings.Contains(got, tc.wantNot)) {
			t.Errorf("%s: warning %q, want it to contain %q and not %q", tc.budget, got, tc.want, tc.wantNot)
		}
	}
}

// An inner budget's warning names the leaves below it, at most five.
func TestParseInNamesLeavesOfInnerBudget(t *testing.T) {
	under := map[string][]string{"lab": {"lab/a", "lab/b"}, "big": {"big/1", "big/2", "big/3", "big/4", "big/5", "big/6", "big/7"}}
	b := Budgets{Leaf: func(p string) (bool, bool) { _, inner := under[p]; return inner || p == "lab/a", !inner },
		Under: func(p string) []string { return under[p] }}
	for budget, want := range map[string]string{
		"lab": `budget "lab" has sub-budgets; the job runs unallocated. Name one of its leaves instead: lab/a, lab/b`,
		"big": "Name one of its leaves instead: big/1, big/2, big/3, big/4, big/5 and 2 more (`allot budgets list`)",
	} {
		c := ParseIn("j", map[string]string{"budget": budget, "min_runtime": "1h"}, Config{}, b)
		if c.Allocated || len(c.Warnings) != 1 || !strings.HasSuffix(c.Warnings[0].Message, want) {
			t.Errorf("%s: %+v, want one warning ending %q", budget, c.Warnings, want)
		}
	}
}

// FuzzParse checks the invariants of every contract, whatever the meta says.
func FuzzParse(f *testing.F) {
	f.Add("lab/a", "4h", "true", "70")
	f.Add("lab", "12h", "YES", "101")
	f.Add("", "-5m", "maybe", "x")
	f.Fuzz(func(t *testing.T, budget, minRuntime, resumable, priority string) {
		meta := map[string]string{"budget": budget, "min_runtime": minRuntime, "resumable": resumable, "priority": priority}
		c := Parse("j", meta, Config{}, tree)
		if c.Allocated {
			if _, leaf := tree(c.Budget); !leaf {
				t.Fatalf("allocated to %q, which is not a leaf", c.Budget)
			}
			if c.Protected <= 0 || c.Protected > DefaultRuntimeCap || c.Protected > c.MinRuntime {
				t.Fatalf("protected %v outside (0, min(%v, cap)]", c.Protected, c.MinRuntime)
			}
		} else if c.Protected != 0 {
			t.Fatalf("unallocated job protected for %v", c.Protected)
		}
		if c.MinRuntime < 0 {
			t.Fatalf("negative MinRuntime %v", c.MinRuntime)
		}
		if c.Priority < MinPriority || c.Priority > MaxPriority {
			t.Fatalf("priority %d outside 0-100", c.Priority)
		}
		for _, w := range c.Warnings {
			if w.Job != "j" || w.Message == "" || meta[w.Key] != w.Value {
				t.Fatalf("warning %+v does not quote its job, key and value", w)
			}
		}
	})
}
