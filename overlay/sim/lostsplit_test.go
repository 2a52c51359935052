package sim

import "testing"

// The lost work is split: whole runs of jobs that are not resumable, and of
// those what a job's second or later lossy stop threw away (a run restarted
// from zero and stopped again). A resumable job's checkpoint loss is in
// neither part.
func TestLostWorkSplit(t *testing.T) {
	h := newHarness(t, 4, 4)
	nr := h.submit("not-resumable", 50, 1, 4)
	h.s.jobs[nr].spec.Resumable = false
	rs := h.submit("resumable", 50, 1, 4)
	h.wantPlaced(nr, 1)
	h.wantPlaced(rs, 1)

	stop := func(j int32) {
		t.Helper()
		h.s.StopAllocs([]int32{h.s.jobs[j].slots[0]}, StopTimeSlice)
		h.s.schedule()
		h.wantPlaced(j, 1) // the replacement is placed at once and runs from now
	}
	h.s.now = 3600
	stop(nr) // its first stop: 1h of 4 GPUs thrown away
	stop(rs) // resumable: 15m (CheckpointLoss) of 4 GPUs
	h.s.now = 3600 + 1800
	stop(nr) // stopped again: the 30m its restart ran

	r := h.s.result("test", &Trace{}, h.s.now)
	if r.LostGPUHours != 4+1+2 || r.LostWholeGPUHours != 4+2 || r.LostAgainGPUHours != 2 {
		t.Fatalf("lost %.2f GPU h, whole runs %.2f, again %.2f; want 7, 6, 2",
			r.LostGPUHours, r.LostWholeGPUHours, r.LostAgainGPUHours)
	}
}
