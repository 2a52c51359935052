package nomad

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/nomad/api"

	"github.com/allot-sched/allot/overlay/nomad/nomadtest"
)

func TestSetEligibilityWritesOnlyAChange(t *testing.T) {
	fake := nomadtest.NewNodes(t, map[string]string{"n1": api.NodeSchedulingEligible, "n2": api.NodeSchedulingIneligible})
	c, err := NewClientFor(fake.URL)
	if err != nil {
		t.Fatal(err)
	}
	a := NewApplier(c, ApplyConfig{}, nil)
	ctx := context.Background()
	for _, c := range []struct {
		node     string
		eligible bool
	}{{"n1", true}, {"n2", false}, {"n1", false}, {"n2", true}} {
		if err := a.SetEligibility(ctx, c.node, c.eligible); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"n1 ineligible", "n2 eligible"}
	if got := fake.Writes(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("writes = %v, want %v", got, want)
	}
	if err := a.SetEligibility(ctx, "n9", true); err == nil {
		t.Error("unknown node n9: no error")
	}
}
