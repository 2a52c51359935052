package sim

import "time"

// The model of a stopped task's exit (docs/nomad-facts.md i), with
// Options.KillTimeout. Nomad stops an
// allocation's task with its kill_signal (SIGINT) and kills it kill_timeout
// later; the scheduler counts the GPUs free at once, but the client starts a
// task placed on them only after the task that held them has exited ("the
// preempting allocation starts only after its victims' tasks have
// terminated"). The model takes every stopped task to run its whole
// kill_timeout (a task that checkpoints on the signal uses it; one that
// exits at once only starts its successor a few seconds sooner, 5 s with
// Nomad's default), so:
//   - a stopped task exits Options.StopLatency (its client hearing of the
//     stop) plus its kill_timeout after the stop;
//   - an allocation placed on GPUs a stopped task still holds starts its own
//     Options.StartLatency only once that task has exited (State.placedAll);
//   - such an allocation is the one a priority write replaces while the
//     stopped task has not exited (State.replaceStarting): measured by the
//     fidelity harness, a real Nomad updated a pending allocation in place
//     when it was placed on free GPUs and replaced it ("alloc is being
//     updated due to job update") when it was placed on GPUs a stop had just
//     freed;
//   - a job whose trace row declares a kill_timeout saves on the signal: a
//     stop costs it kill_timeout less work than it would lose without one
//     (State.interrupt), none once kill_timeout covers it. A job that
//     declares none loses what it loses today.

// DefaultKillTimeout is Nomad's kill_timeout for a task that sets none.
const DefaultKillTimeout = 5 * time.Second

// killSec is job j's kill_timeout in seconds.
func killSec(j *job) int64 {
	if j.spec.KillTimeout > 0 {
		return int64(j.spec.KillTimeout / time.Second)
	}
	return int64(DefaultKillTimeout / time.Second)
}

// exiting records that the task of allocation a, stopped now for why,
// holds its GPUs until it exits: Options.StopLatency and its kill_timeout
// from now, or, preempted before its task started, until its client
// reports it done (pendingStop). The servers hear of an exit
// Options.FinishLatency after it, as of a finish (node.heard): the blocked
// evals are retried then.
func (s *State) exiting(a int32, why StopReason) {
	if !s.opts.KillTimeout {
		return
	}
	al := &s.allocs[a]
	if at := s.pendingStop(a, why); at > 0 {
		s.nodes[al.node].heard.hold(s.now, al.mask, at)
		s.exitWake(at)
		return
	}
	at := s.now + int64(s.opts.StopLatency/time.Second) + killSec(&s.jobs[al.job])
	s.nodes[al.node].exit.hold(s.now, al.mask, at)
	heard := at + int64(s.opts.FinishLatency/time.Second)
	s.nodes[al.node].heard.hold(s.now, al.mask, heard)
	s.exitWake(heard)
}

// exitWake retries the blocked evals when a stopped task exits at at
// (Options.ExitHolds): only then could another job's preemption take its
// GPUs (exitHeld).
func (s *State) exitWake(at int64) {
	if s.opts.ExitHolds && at > s.now {
		s.pushEvent(at, evExited, -1, 0)
	}
}

// exitHeld reports whether allocation a sits on GPUs a stopped task still
// holds in the scheduler's view (Options.ExitHolds): Nomad counts that
// task's devices until its client reports it done, so preempting a frees
// nothing before then.
func (s *State) exitHeld(a int32) bool {
	return s.opts.ExitHolds && s.now < s.allocs[a].heardAt
}

// onExiting reports when the stopped tasks still holding any of GPUs mask
// of node n exit; 0 when none does.
func (s *State) onExiting(n int32, mask uint64) int64 {
	nd := &s.nodes[n]
	return max(nd.exit.until(s.now, mask), nd.pend.until(s.now, mask))
}

// killSaved is the work (seconds) job j saves of lost at a stop by
// checkpointing within its declared kill_timeout.
func killSaved(j *job, lost int64) int64 {
	return min(lost, int64(j.spec.KillTimeout/time.Second))
}

// startsAt is when a task placed now runs: StartLatency after the exit of
// the stopped tasks on its GPUs (exit, 0 for none) or now, and, with
// Options.StartSpacing, a task placed on free GPUs no sooner than
// StartSpacing after the task start before it began. A task that waits for
// an exit neither queues nor holds the queue: the fidelity harness measures
// the spacing on placements on free GPUs only (its clients' starts coming
// together), and one that held the queue until an exit minutes away (a
// victim reported late, pendingstop.go) kept every later start waiting
// behind it (drain, run 10 replayed with -pending-stop-latency: j-6,
// placed on a running victim's GPUs, started 7.7 minutes after its
// placement, against Nomad's 0.6 and 1.9 without the option).
func (s *State) startsAt(exit int64) int64 {
	begin := max(s.now, exit)
	if sp := int64(s.opts.StartSpacing / time.Second); sp > 0 && exit <= s.now {
		begin = max(begin, s.startNext)
		s.startNext = begin + sp
	}
	return begin + int64(s.opts.StartLatency/time.Second)
}

// replaced reports whether a priority write now replaces allocation a (not
// running yet): with Options.KillTimeout, while the stopped task whose GPUs
// it was placed on has not exited; without, within StartLatency of its
// placement.
func (s *State) replaced(a int32) bool { return s.now < s.replacedEnd(a) }

// replacedEnd is when replaced(a) turns false.
func (s *State) replacedEnd(a int32) int64 {
	al := &s.allocs[a]
	if s.opts.KillTimeout {
		return al.exitAt
	}
	return al.start + int64(s.opts.StartLatency/time.Second)
}
