package sim

import "time"

// The model of a preemption whose victim had not started
// (Options.PendingStopLatency, with Options.KillTimeout). Nomad frees a
// victim's GPUs in its plan, but the preemptor's client starts the
// preemptor only once every victim is terminal (the await_preemptions hook,
// nomad-facts i). The fidelity harness found that a victim whose task had
// not started yet (an allocation placed a moment before, its client still
// setting it up) was reported done long after its task was marked dead:
// 323-344 trace seconds later in run 8 (K = 80) and 488-548 in run 9 (K =
// 120), 4.0-4.6 s of wall time in both, a delay on the client that the
// harness's time compression does not scale (Nomad's log collector timing
// out on the output pipes of a task killed before it ran, a client's log
// showed; the harness now runs its tasks without log collection, and the
// delay is 51 s-2 min of trace time). The preemptor waits all that
// time, and allot, which reads it as waiting for its victims
// (policy.Alloc.WaitsForVictims), holds a priority write to its job at
// most policy.Config.Settle from the placement; the write then replaces it
// (a job update), and the replacement, placed on the same GPUs, starts
// once the victims are reported. So, with PendingStopLatency:
//   - a victim preempted before its task ran, whose client hears of the
//     stop (Options.StopLatency) before it would start the task, holds its
//     GPUs for what is placed on them until PendingStopLatency after the
//     preemption (node.pend; onExiting). That includes a victim
//     placed in the instant of its preemption: the model processes a
//     time-slice victim's replacement and the evaluate that preempts it in
//     one instant, where Nomad's one scheduler worker placed them 32 s-3.3
//     trace minutes apart (reserve's b-large-0 in runs 8, 9 and 11), and
//     the replacement had reached its client. One its client starts first
//     (it had not heard of the stop: free work preempted just before it
//     ran, on the real side too) exits as a running task does;
//   - the preemptor waits for its victims until the last of them exits
//     (alloc.preempting, exitAt), pending in allot's view.
// A victim that had started exits as any stopped task (StopLatency plus
// its kill_timeout). Off (0), the model is as before: an unstarted victim
// exits as a running one does.

// pendingStop records, for allocation a stopped now for why, that its
// client reports it done only PendingStopLatency from now, when Nomad
// preempted it and its client hears of it before the task would start;
// it returns when (0 when it did not).
func (s *State) pendingStop(a int32, why StopReason) int64 {
	d := int64(s.opts.PendingStopLatency / time.Second)
	al := &s.allocs[a]
	hears := s.now + int64(s.opts.StopLatency/time.Second)
	if d <= 0 || why != StopPreempted || hears >= al.runsAt {
		return 0
	}
	s.nodes[al.node].pend.hold(s.now, al.mask, s.now+d)
	return s.now + d
}

// preempting marks allocation a, placed now by preempting the allocations
// on its GPUs, as waiting for its victims while their tasks have not
// exited (Options.KillTimeout; without it they are gone at once).
func (s *State) preempting(a int32) {
	if al := &s.allocs[a]; al.exitAt > s.now {
		al.preempting = true
	}
}

// waitsForVictims reports whether allocation a waits for the tasks of the
// allocations Nomad preempted for it to exit (policy.Alloc.WaitsForVictims).
func (s *State) waitsForVictims(a int32) bool {
	al := &s.allocs[a]
	return al.preempting && s.now < al.exitAt
}
