package sim

import "time"

// The model of a finished task's report (Options.FinishLatency). A task
// that finishes its work exits on its client, and the client reports it
// done to the servers some time later; only then does Nomad count its GPUs
// free and retry the blocked evals that could use them. The fidelity
// harness measured it on a real Nomad: a finished task's GPUs were placed
// on again 22-36 trace seconds (the median per trace) after the task's end,
// where the model placed at once. So, with FinishLatency:
//   - the job is done, and its allocations stopped, at the finish (the event
//     log's stop and done, the work and GPU time counted);
//   - its GPUs stay unavailable to the scheduler until FinishLatency later,
//     when they free up as any stop's do (blocked evals retried);
//   - the policy hears of the finish then too (allot reads it from Nomad):
//     the allocation joins State.ended, where the allot adapter finds it.

// report is a finished allocation's GPUs mask on node, free in Nomad's
// view at at.
type report struct {
	at    int64
	node  int32
	mask  uint64
	alloc int32
	ended bool // taken off State.ended until then
}

// withhold keeps the GPUs of allocation a, stopped now because its task
// finished, from the scheduler until Nomad hears of the finish.
func (s *State) withhold(a int32) {
	d := int64(s.opts.FinishLatency / time.Second)
	if d <= 0 {
		return
	}
	al := &s.allocs[a]
	s.setHeld(al.node, s.nodes[al.node].held|al.mask)
	r := report{at: s.now + d, node: al.node, mask: al.mask, alloc: a}
	if n := len(s.ended); n > 0 && s.ended[n-1] == a { // stopAlloc's entry
		s.ended, r.ended = s.ended[:n-1], true
	}
	s.reports = append(s.reports, r)
	s.pushEvent(s.now+d, evReported, -1, 0)
}

// reported frees the GPUs of the finishes Nomad hears of now (the latency
// is one for all, so they come in finish order).
func (s *State) reported() {
	k := 0
	for ; k < len(s.reports) && s.reports[k].at <= s.now; k++ {
		r := s.reports[k]
		s.setHeld(r.node, s.nodes[r.node].held&^r.mask)
		if r.ended {
			s.ended = append(s.ended, r.alloc)
		}
	}
	if k > 0 {
		s.reports = s.reports[k:]
		s.wakeAll = true
		s.changed = true
	}
}
