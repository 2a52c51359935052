package sim

import "testing"

// TestSpreadOverPools: a generated trace on two pools gives each job a
// pool that can hold it, with its model, about in proportion to the pools'
// GPUs; one pool changes nothing.
func TestSpreadOverPools(t *testing.T) {
	c := ClusterSpec{Pools: []Pool{{Name: "h100", Nodes: 30, GPUsPerNode: 8, Model: "h100"},
		{Name: "small", Nodes: 10, GPUsPerNode: 4, Model: "b200", NodePool: "gpu"}}}
	tr := &Trace{}
	for i := 0; i < 4000; i++ {
		tr.Jobs = append(tr.Jobs, JobSpec{ID: "j", Count: 1, GPUs: 4})
	}
	tr.Jobs = append(tr.Jobs, JobSpec{ID: "wide", Count: 1, GPUs: 8}, JobSpec{ID: "gang", Count: 20, GPUs: 4},
		JobSpec{ID: "never", Count: 40, GPUs: 8})
	SpreadOverPools(tr, c, 1)
	n := map[string]int{}
	for _, j := range tr.Jobs[:4000] {
		switch {
		case j.Pool == "h100" && j.Model == "h100", j.Pool == "gpu" && j.Model == "b200":
			n[j.Pool]++
		default:
			t.Fatalf("job on pool %q model %q", j.Pool, j.Model)
		}
	}
	// 240 of 280 GPUs are h100: 6/7 of the jobs, give or take.
	if f := float64(n["h100"]) / 4000; f < 0.83 || f > 0.88 {
		t.Errorf("%.3f of the jobs on h100, want about 0.857", f)
	}
	for _, j := range tr.Jobs[4000:] {
		want := map[string]string{"wide": "h100", "gang": "h100", "never": ""}[j.ID]
		if j.Pool != want {
			t.Errorf("%s on %q, want %q (the only pool that holds it)", j.ID, j.Pool, want)
		}
	}
	one := &Trace{Jobs: []JobSpec{{ID: "a", Count: 1, GPUs: 1}}}
	SpreadOverPools(one, UniformCluster(4, 8), 1)
	if one.Jobs[0].Pool != "" || one.Jobs[0].Model != "" {
		t.Errorf("one pool changed the job: %+v", one.Jobs[0])
	}
}
