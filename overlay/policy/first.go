package policy

// placesFirst is rule 5f: pending job j is written at the top of the
// pending band (the band levels may use, gapBand) when time slicing stops
// victims for it in this plan (rule 5), or victims stopped for it earlier
// are still held below it and the placement model places it on their GPUs
// (creditHeld); not a gang waiting whole (rule 5d), and not while a job
// holding a reservation sorts before it (its victims stay below that job,
// and so does it: reserve.go). Nomad has no notion of whom a stop was for:
// when the victims' GPUs free up, it retries every blocked job by priority,
// then first come, first served (docs/nomad-facts.md d), and the first one
// that fits takes them. At its position's level the job the stops were for
// is below every pending job sorting before it, and far down the queue
// (rule 5b examines quick jobs past the first MaxEvaluations) it shares
// the band's bottom with the gangs waiting whole there and every job past
// Pending.Levels() places, older evaluations that Nomad serves first. So
// the stops threw work away for another job: on heavy-1024 seed 1 of the
// suite (fc5914a), 233 of the 364 decisions that stopped victims for a
// debug job did not see it start within two minutes (the GPUs went to
// gangs placed in part and other jobs; one debug job had victims stopped
// for it 26 times in 57 hours), and 287 of the 380 rule 5b beneficiaries
// sat at Pending.Low. Written at the top it takes only what its victims
// free (it did not fit anywhere else) and the jobs before it lose nothing
// they were given: the victims were stopped for its claim (fair share or
// its budget's own order, rule 5), not theirs; its victims stay a
// preemption gap below it (victimLevel). It goes back to its position once
// it places or its victims' hold ends.
func (d *Decider) placesFirst(j int32) bool {
	info := &d.jobs[j]
	if info.state != jsPending || info.whole || info.restartHeld {
		return false
	}
	if info.wait != WaitVictims && (info.holding == 0 || !info.fits) {
		return false
	}
	return len(d.gaps) == 0 || d.gapAbove(info.position) < 0
}

// notResumable is ReasonPendingFirst's Detail for a job that is not
// resumable: its explanation still says that it restarts from zero.
const notResumable = "not resumable"
