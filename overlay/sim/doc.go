// Package sim is allot's discrete-event simulator: it replays a workload trace
// through a policy (the real overlay/policy code, or the baseline of the world
// before allot) against a model of Nomad's scheduler, and measures queue
// waits, preemptions, lost work, occupancy and delivered-versus-owed GPU time.
//
// The engine jumps from event to event (submissions, work finished, node
// health changes, policy reconciles and wake-ups) and never ticks through idle
// time. A policy reconciles Options.ReactionDelay after a change the cluster
// made (coalescing the changes within it; a pass at a wake-up sees them too
// and cancels the reconcile still due) and at the exact times it asks to be
// woken; its own priority and eligibility writes wake it only through the
// placements and stops they cause. The real server reconciles at least every
// 5 seconds, so the model decides less often than it; the exactness tests of
// policy.Incremental make the plans themselves the server's. The package does no I/O beyond the readers and writers it is handed,
// reads no clock, and never imports the server or the Nomad adapter.
//
// The cluster model reproduces docs/nomad-facts.md (sections b, c, d,
// e and i) and Nomad's node pool rule: a job is placed only on nodes of its
// node pool (the trace's pool column; "default" when it names none, as a
// job without node_pool is), and with a model column only on nodes of that
// GPU model (a device constraint). A job whose pool and model no node has
// is registered and never placed, as in Nomad; Trace.Check warns of it,
// counted, before the run, and Result.NeverPlaceable counts it; its GPUs
// are not its leaf's demand (no scheduler could give them), so they are
// left out of owed time for every policy and the report names them
// (BudgetResult.Unservable). Nomad's
// built-in pool "all" is refused. A cluster pool's NodePool puts several
// groups of nodes (H100 and B200, say) in one Nomad pool.
//
// Fidelity: the harness of e2e/fidelity_test.go (make fidelity) runs the
// traces of examples/sim/fidelity on a real Nomad driven by allot and
// through this model, both writing the event log of Event, and Compare
// measures them (the README's "How faithful is the simulator" has the
// method and the current figures, docs/simulator-fidelity.md the findings
// and every run's figures). What it showed is modelled where it could be:
//   - Options.StartLatency: a placed allocation's task runs some time after
//     the placement (the client's work; 0.6-1.4 s of wall time on the
//     loaded 2-core machine, which the harness's time compression makes
//     1.2-2.8 trace minutes). The GPUs are held from the placement, the
//     job's work clock and protected window start when its last allocation
//     runs; the held time before is stalled. Options.StartSpacing: starts
//     that come together queue (the harness's three clients share one
//     machine: 58-104 trace s alone, 125-226 s with four placements in the
//     second before).
//   - A priority write Nomad would carry out by replacing an allocation:
//     Nomad replaces an allocation placed on GPUs a stopped task still
//     holds when the job's priority changes (its in-place update finds the
//     allocation no longer fits; "alloc is being updated due to job
//     update", a StopJobUpdate in the real side's log), and updates a
//     running one, or a pending one placed on free GPUs, in place (facts
//     a; measured: 17 of 23 replacements were of the first kind, 5 of 189
//     pending placements on free GPUs were replaced). allot's adapter asks
//     Nomad's planner first and refuses such a write (nomad.ErrWouldReplace)
//     but to a job it stops in the same batch; so does State.SetPriority
//     (Result.RefusedWrites), and the policy runs again when the task exits. Which allocations:
//     with Options.KillTimeout those placed on GPUs a stopped task has not
//     left; without, those placed less than StartLatency ago.
//   - The eval order of a lever (Options.EvalOrder, State.runNew; on in the
//     harness, off by default): the eval a stop, a priority write or an
//     evaluate creates is processed before the next one is made, as
//     Nomad's broker hands each eval to an idle scheduler at once
//     and allot's adapter makes one call after another. A time-slice or
//     reservation victim's replacement so takes back the GPUs its stop freed,
//     and the evaluate of the job it was stopped for then preempts it (or
//     other work a gap below): a stop of allot's is followed by a
//     nomad-preemption stop, as on the real side. The blocked evals the
//     freed capacity wakes are retried after the plan's calls.
//   - Stopped tasks exit late (Options.KillTimeout, killtimeout.go; on in
//     the harness, off by default): Options.StopLatency (the client
//     hearing of the stop; measured per run by the harness) plus the
//     job's kill_timeout (the trace's kill_timeout column, Nomad's default
//     5 s) after the stop; an allocation placed on their GPUs (a preemptor,
//     a replacement, a beneficiary) starts its own StartLatency only then
//     (facts i). A job that declares a kill_timeout saves that much of the
//     work a stop would throw away.
//   - Finished tasks are reported late (Options.FinishLatency,
//     finishlatency.go; set by the harness, 0 by default): Nomad, and allot
//     through it, hear that a task finished its work only when its client
//     reports it done, and place on its GPUs then (measured: 22-41 trace
//     seconds at the median per trace at K = 120, about 0.25 s of wall
//     time). The job is done at its finish.
//   - Health changes are heard late (Options.HealthLatency; set by the
//     harness, 0 by default): a Nomad client re-registers a changed device
//     fingerprint 5-10 s of wall time after its plugin reports it
//     (nodeUpdateRetryIntv plus a random stagger as long), and Nomad's
//     scheduler and allot see the fault only then; the model applies a
//     trace's health row that long after its time. On a real cluster that
//     is seconds; at the harness's K = 120 it was 11-19 trace minutes
//     (runs 16 and 17), during which the model drained at once and Nomad
//     kept placing on the faulty node. The stagger is drawn afresh for
//     every change, so the harness now moves each health row to the time
//     Nomad's servers held it (e2e heardHealth) and runs the model with
//     no latency of its own.
//   - A victim preempted before its task ran is reported late
//     (Options.PendingStopLatency, pendingstop.go; set by the harness, 0
//     by default): when its client hears of the stop before it would start
//     the task, the preemptor starts only once the client reports the
//     victim done, and allot's adapter reads the preemptor as waiting for
//     its victims (policy.Alloc.WaitsForVictims) until then, holding a
//     priority write to its job at most policy.Config.Settle (the write
//     then replaces the placement). Measured: with log collection on, 64
//     of 71 such victims in two runs were reported about 4 s of wall time
//     after their task was marked dead (Nomad's log collector timing out
//     on the task's output pipes: 8-10 trace minutes at K = 120); the
//     harness now runs its tasks without log collection: 7 such victims
//     in its first run so, reported 52 s and 1m59s (the medians of two
//     traces; none on the third) after the preemption.
//   - allot's pass on a task's end (Options.PassOnReport; on in the
//     harness, off by default): a real allot hears a client's report of a
//     finished or stopped task from Nomad's event stream as the scheduler
//     does, and its pass reads a view with the task's GPUs free and the
//     placements Nomad is making on them not there yet; its writes land
//     after them. So at the report the policy decides before the
//     scheduler places, and its plan is carried out after. Measured
//     (fidelity run 46, reserve, allot's decision log): 17 reservations on
//     Nomad's side, 4-50 trace seconds after finishes, against one in the
//     model, which ran the policy only ReactionDelay after the report;
//     with the option the model makes 15 on run 47's trace (Nomad 14), and
//     runs 39-47 replayed agree with Nomad on reserve as Nomad agrees with
//     itself (tau 0.902 -> 0.930, Nomad's own 0.926).
//   - allot's periodic pass (Options.ReconcileInterval; K x 2 s in the
//     harness, off by default): allot's leader reconciles every
//     ReconcileInterval (5 s by default) besides the passes events wake,
//     and fair-share standings move with usage between events, so a real
//     allot acts on a crossing at its next pass, the model (without the
//     option) at its next event. Measured on runs 39-49 replayed: slicing's
//     wait p90 14m48s -> 10m40s apart from Nomad, the stopped set 80% ->
//     82%; reserve unchanged; drain within a few seconds.
//   - A stopped task's GPUs are held until it exits (Options.ExitHolds,
//     with KillTimeout; on in the harness, off by default): Nomad's
//     scheduler counts an allocation's devices until its client reports it
//     done (its proposed allocations drop only client-terminal ones), so
//     after a stop only the victim's replacement, placed in the stop's own
//     plan, gets them; the evaluate of the job the stop was for cannot
//     preempt the replacement and blocks, and when the task exits the
//     blocked evals are retried, by priority then age, and the first that
//     fits preempts the replacement. Measured (Nomad's evaluations, fidelity
//     run 24, drain): 15 of 19 beneficiaries' evaluates just after the stop
//     failed with every node's devices exhausted, and one was overtaken by
//     a job blocked before it at the same priority, for which allot then
//     stopped a second victim. The servers hear of the exit as of a
//     finish, Options.FinishLatency after it (the client's report): until
//     then the GPUs stay held and the blocked evals wait, while the
//     replacement, which needs no report, starts at the exit. Retried at
//     the exit itself, the model preempted replacements just before their
//     start (then held their preemptor for the pending-stop latency, 1-2
//     trace minutes) where Nomad preempted them seconds after it; fidelity
//     runs 39-44 replayed with the report: reserve's budgets 2.2-3.6% ->
//     0.2-0.6% apart, drain's wait p50 11m34s -> 5m03s apart on average.
//
// What the model leaves out, and what each omission is expected to do to
// its figures (the fidelity traces ask little CPU and memory and one task
// per job, so they measure neither of the first two):
//   - CPU and memory never bind: only GPUs are modelled, one GPU model per
//     node. A real node can have free GPUs and no CPU or memory left; then a
//     job blocks where the model places it, and Nomad may preempt for CPU or
//     memory (allot's pending band can evict unmanaged work at 79 or below).
//     Expected: the model's waits and fragmentation are lower than Nomad's
//     on clusters whose jobs ask much CPU or memory per GPU, and its node
//     choice (GPU fill standing for Nomad's CPU and memory score) differs,
//     which shows as start-order differences, not as different totals.
//   - One task group with one task per job. A job of several groups is
//     placed group by group; Nomad's device preemption counts a multi-task
//     victim's devices once per task (facts i) and so evicts more than it
//     needs. Expected: the model understates Nomad-preemption stops and the
//     work they throw away for multi-task jobs; allot's own time slicing,
//     which picks whole-job victims itself, is not affected.
//   - No placement latency: an eval is processed at the instant of the event
//     that made it (measured on the real side: submit to placement 0.7-2 s
//     of trace time at the median, 5-23 s at p90 under load, at K = 120).
//     Expected: waits short by that, below the fidelity targets' 2 minutes.
//   - Without a replacement on them, GPUs a stop freed are free to every
//     eval at once, where Nomad counts them held until the stopped task's
//     client reports it done (ExitHolds models that only for the victim's
//     replacement, which takes them back in nearly every stop of allot's;
//     a finish's report is Options.FinishLatency). Expected: a job that was
//     blocked takes GPUs a stop freed, and no replacement took, up to
//     StopLatency plus kill_timeout sooner than on Nomad.
//   - Nomad's scheduler runs several evals at once (one worker per core)
//     and retries a plan the applier refused; the model runs one after
//     another. Expected: the real side sometimes places a lower-priority
//     job first and preempts it with the higher one a moment later
//     (nomad-preemption stops between jobs of one budget that the model
//     does not make; the reserve trace shows most of them). The fidelity
//     harness runs its server with one worker (num_schedulers = 1), so it
//     measures the model without this difference.
//
// Further simplifications of the cluster model:
//   - Binpack: Nomad shuffles the feasible nodes and, for batch jobs, scores
//     only the first 2 it finds (scheduler/feasible/stack.go: limit 2 after
//     ShuffleNodes); the model draws 2 distinct feasible nodes uniformly at
//     random (the same distribution) from a seeded generator and keeps the
//     fuller one (fewest free healthy GPUs after placement). Nomad's fit
//     score reads CPU and memory only, so GPU fill stands for it: the model
//     assumes tasks ask CPU and memory in proportion to their GPUs.
//     PlacementBestFit scores every node instead, as Nomad does for a job
//     with an affinity (the limit rises to 100 nodes): the node with the
//     largest share of its GPUs held after the placement wins, ties to the
//     first node, in the preemption pass too (Nomad's preemption score, a
//     logistic of the victims' net priority centred at 2048, moves a node's
//     score by less than 1e-3, a GPU of binpack by 0.05; the two-choice
//     model keeps the lower priority sum). The fidelity harness runs Nomad
//     so (its jobs carry affinities for the clients' names, weights 100, 99,
//     98, which break binpack's ties by node order) and the model with it.
//     On the example scenario it changes debug waits by less than the seed
//     does, so fragmentation from the two-choice draw is not what makes
//     small jobs wait; but it halves the work Nomad's preemption of free
//     work throws away (50,406 to 25,004 GPU hours, seed 1): scoring every
//     node, a preemption lands where it evicts least.
//   - A job makes progress only while all its allocations run (a distributed
//     job waits for its last worker); GPU time held by a job placed in part is
//     reported as stalled.
//   - Allocations of the placing job are never victims, as in Nomad; since a
//     job's allocations share its priority (a change is in place), the
//     10-point gap already keeps them apart.
//   - Every blocked eval is tried on its own at each capacity change: a small
//     ask places while a larger, higher one stays blocked (facts i). Checked
//     on the example scenario: no pending job ever waited while its ask fit
//     the free GPUs of an eligible node.
//   - Blocked evaluations keep their place (CreateIndex) when they block
//     again; a priority change or an evaluate creates a new one at the back of
//     its priority, as Nomad does.
//
// Demand (GenConfig.Demand, Allocated): "demand 2-3x capacity" counts all
// work submitted, allocated and unallocated. It cannot be the allocated
// arrival rate: allocated arrivals above capacity keep the cluster full of
// protected and running allocated work, while the published shape has
// occupancy o = 98% of which u = 18% is unallocated, so allocated load is
// o(1-u) = 0.80 of capacity and unallocated occupancy can never exceed
// 1 - allocated. The example submits allocated work at 0.85x capacity
// (a little above the 0.80 delivered, so budgets are sometimes short of
// demand, not only of share) and unallocated filler for the rest of 2.5x.
//
// Warm-up (Options.Warmup, `allot sim -warmup`, 24h by default): a
// generated trace starts on an empty cluster that takes most of a day to
// fill, so the first day is left out of the measurements, for every policy
// alike (waits of jobs submitted in it, GPU time, stops, lost work, drains);
// job counts and budgets' owed and delivered time cover the whole run: fair
// share's lookback window reaches into the warm-up, so what a budget got
// there is what fair share pays back after it (BudgetResult).
//
// Drains: each unhealthy episode of a node (first GPU unhealthy) is
// followed to drained (empty and ineligible) or to its recovery. The report
// gives time to drained, work lost to drain stops and deadline kills, healthy
// GPUs left idle on cordoned nodes before they drained, jobs killed without a
// replacement, and drains that needed no operator: the baseline's
// operator runs `nomad node drain -deadline` on each unhealthy node
// (State.NoteOperator), allot drains by itself.
//
// The generator (Generate) and the baseline encode these assumptions about
// people, each a knob of GenConfig or BaselineConfig:
//   - Researchers give debug and interactive runs a higher within-budget
//     priority than their team's training backlog (DebugPriority above
//     TrainPriority): someone is waiting at a terminal for them. Allot
//     compares this priority only within a budget leaf.
//   - Unallocated filler (min_runtime 0: evaluation sweeps, data jobs) is
//     submitted by a team and names it; under allot it is free anyway. The
//     baseline runs it in the preemptible tier (BaselineConfig.FillerInLimit
//     off): counting a filler volume that keeps allot's cluster full against
//     the team limits starves every team's training, which is not the
//     published old world.
//   - Baseline: a team's concurrent-GPU limit is its effective share of
//     the cluster's GPUs (LimitScale 1: limits add up to capacity). A job
//     within its team's limit at submission runs at a guaranteed priority; a
//     job beyond it runs preemptible on idle GPUs (overflow, the same band as
//     the filler: overflow never preempts overflow) and waits for the limit.
//     Whenever the limit has room, waiting jobs are admitted highest level
//     first, then first come, skipping those that do not fit (a quota keeps
//     no room for a large job, as Nomad does not). A job waits when nothing
//     of it runs: an overflow job preempted and queued again is admitted
//     like a new one; a running overflow job keeps its tier.
//   - A team sizes its training to its share: no training job asks for
//     more GPUs than its team's effective share of the cluster (whole
//     8-GPU nodes, at least one; GenConfig.TrainCap 1). Nobody submits a
//     job that could never run within the team's own share; with TrainCap 0
//     every team submits every size, and most of a small team's training
//     can then only ever run as the baseline's overflow.
//   - Team demand is uneven (TeamSpread 0.9: a team's training demand is
//     0.1-1.9 times its share, normalized), and allocated work is 0.78 of
//     capacity, so that allot's occupancy splits like the published one
//     (about 80% allocated, 18% unallocated). Teams above their share are
//     what budgets are for: in the baseline they sit at their limit, and
//     their debug jobs run as overflow behind the overflow backlog.
package sim
