package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/allot-sched/allot/overlay/client"
)

// TestPrintUsageBothReadings: a budget served 12 GPU-hours against 3 owed
// reads 400% over the window and 100% the same hour; one served half of what
// it was owed in one hour and nothing in the next reads 25% both ways.
func TestPrintUsageBothReadings(t *testing.T) {
	to := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	u := &client.Usage{From: to.Add(-2 * time.Hour), To: to, CapacityGPUs: 8, Budgets: []client.UsageRow{
		{Path: "ai2", Charged: 13, Demand: 20, Owed: 7, Ratio: 13.0 / 7, Credited: 4, CreditedRatio: 4.0 / 7},
		{Path: "ai2/nlp", Leaf: true, Charged: 12, Demand: 12, Owed: 3, Ratio: 4, Credited: 3, CreditedRatio: 1},
		{Path: "ai2/vision", Leaf: true, Charged: 1, Demand: 8, Owed: 4, Ratio: 0.25, Credited: 1, CreditedRatio: 0.25},
	}}
	var out bytes.Buffer
	if err := printUsage(&out, u); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines:\n%s", len(lines), out.String())
	}
	for i, want := range [][]string{
		{"BUDGET", "CHARGED", "DEMAND", "OWED", "DELIVERED/OWED", "SAME", "HOUR"},
		{"ai2", "13.0", "20.0", "7.0", "186%", "57%"},
		{"ai2/nlp", "12.0", "12.0", "3.0", "400%", "100%"},
		{"ai2/vision", "1.0", "8.0", "4.0", "25%", "25%"},
	} {
		f := strings.Fields(strings.ReplaceAll(lines[i+1], "GPU-H", ""))
		if strings.Join(f, " ") != strings.Join(want, " ") {
			t.Errorf("line %d = %q, want fields %q", i+1, lines[i+1], want)
		}
	}
}
