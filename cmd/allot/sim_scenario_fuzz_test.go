package main

import (
	"strings"
	"testing"
)

// decodeScenario on any input: no panic, and a scenario or problems (the
// caller uses the scenario only without problems), each at
// scenario.json:line:col.
func FuzzDecodeScenario(f *testing.F) {
	for _, s := range []string{
		`{"budgets": "../budgets", "nodes": 128, "gpus_per_node": 8, "generate": {"days": 30, "train_work_min": "2h"}}`,
		`{"pools": [{"name": "a", "nodes": 2, "gpus_per_node": 4, "model": "a100"}, {"Name": "b"}]}`,
		"{\"nodes\": 4}\n{\"nodes\": 8}",
		`{"nodes": "4", "pools": [1, [2]], "generate": []}`,
		`[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		sc, problems := decodeScenario("scenario.json", in)
		if sc == nil && len(problems) == 0 {
			t.Fatal("neither a scenario nor a problem")
		}
		for _, p := range problems {
			if !strings.HasPrefix(p, "scenario.json:") {
				t.Fatalf("problem %q does not name its place", p)
			}
		}
	})
}
