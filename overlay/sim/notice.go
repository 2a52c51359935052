package sim

import "strconv"

// The model of checkpoint notices (docs/design.md, "Notice before a stop").
// allot's plan signals a job with a notice before it stops it for time
// slicing, a reservation or a drain (policy.Plan.Signals), and stops it
// once the notice has run. A job stopped at least its declared notice
// (JobSpec.Notice) after its signal saved all its work: it loses nothing.
// One stopped sooner (a notice capped shorter than the job needs, a stop
// with no signal) loses what it loses today, as does every stop Nomad's own
// preemption makes (free work evicted for allocated work gets Nomad's
// kill_signal and kill_timeout, not allot's notice), or a declared
// kill_timeout's worth less (killtimeout.go).

// noticeMetrics counts the notices and what they saved and cost.
type noticeMetrics struct {
	sent         int64   // allocations signalled
	saved        int64   // stops that lost nothing thanks to a notice
	waits        []int64 // signal to stop of each noticed stop, seconds: the wait a notice adds for the job stopped for
	sessions     int64   // interactive jobs (sessions) stopped by allot or Nomad
	sessionsLost int64   // of which lost work (their state) at a stop
}

// Signal delivers the checkpoint signal to the given running allocations'
// jobs: a notice starts now.
func (s *State) Signal(ids []int32) {
	for _, a := range ids {
		if a < 0 || int(a) >= len(s.allocs) || s.allocs[a].end >= 0 {
			continue
		}
		s.jobs[s.allocs[a].job].signalled = s.now + 1
		if s.now >= s.m.from {
			s.m.notice.sent++
		}
	}
}

// savedAtStop reports whether job j saved all its work before this stop:
// a stop allot planned, its declared notice (or more) after its signal.
func (s *State) savedAtStop(j *job, why StopReason) bool {
	at := j.signalled - 1
	j.signalled = 0
	if at < 0 || (why != StopTimeSlice && why != StopReserve && why != StopDrain) {
		return false
	}
	if s.now >= s.m.from {
		s.m.notice.waits = append(s.m.notice.waits, s.now-at)
	}
	if s.now-at < int64(j.spec.Notice.Seconds()) {
		return false
	}
	if s.now >= s.m.from {
		s.m.notice.saved++
	}
	return true
}

// sessionStopped counts an interactive job's stop, and whether it lost its
// state (work) there.
func (s *State) sessionStopped(j *job, why StopReason, lost int64) {
	if j.spec.Class != ClassInteractive || why == StopEnd || s.now < s.m.from {
		return
	}
	s.m.notice.sessions++
	if lost > 0 && !j.stateLost {
		j.stateLost = true
		s.m.notice.sessionsLost++
	}
}

// allocIndexes appends the model's allocation indexes of a plan's
// allocation IDs ("a" and the index: Allot.allocID).
func allocIndexes(ids []int32, allocs []string) []int32 {
	for _, id := range allocs {
		if n, err := strconv.Atoi(id[1:]); err == nil {
			ids = append(ids, int32(n))
		}
	}
	return ids
}

// NoticeResult is what checkpoint notices did in a run.
type NoticeResult struct {
	// Signalled counts allocations sent a checkpoint signal.
	Signalled int64 `json:"allocations_signalled"`
	// Saved counts stops after which the job lost nothing.
	Saved int64 `json:"stops_saved"`
	// WaitP50, WaitP90 (seconds) and WaitGPUHours are the waits notices
	// added: signal to stop, for the job each stop made room for.
	WaitP50   float64 `json:"wait_p50"`
	WaitP90   float64 `json:"wait_p90"`
	WaitHours float64 `json:"wait_hours"`
	// Sessions counts stops of interactive jobs (sessions);
	// SessionsLost the sessions that lost their state at one.
	Sessions     int64 `json:"session_stops"`
	SessionsLost int64 `json:"sessions_lost_state"`
}

func (m *metrics) noticeResult() NoticeResult {
	n := &m.notice
	w := sortedCopy(n.waits)
	var sum int64
	for _, x := range w {
		sum += x
	}
	return NoticeResult{Signalled: n.sent, Saved: n.saved, WaitP50: float64(percentile(w, .5)), WaitP90: float64(percentile(w, .9)),
		WaitHours: float64(sum) / 3600, Sessions: n.sessions, SessionsLost: n.sessionsLost}
}
