// Package sim is allot's discrete-event simulator: it replays a workload trace
// through a policy (the real overlay/policy code, or the baseline of the world
// before allot) against a model of Nomad's scheduler, and measures queue
// waits, preemptions, lost work, occupancy and delivered-versus-owed GPU time.
//
// The engine jumps from event to event (submissions, work finished, node
// health changes, policy reconciles and wake-ups) and never ticks through idle
// time. The package does no I/O beyond the readers and writers it is handed,
// reads no clock, and never imports the server or the Nomad adapter.
//
// The cluster model reproduces ../../shared/nomad-facts.md (sections b, c, d,
// e and i) with these simplifications:
//   - Only GPUs are modelled; CPU and memory never bind. One GPU model per node.
//   - Each job has one task group with one task; so Nomad's double counting of
//     multi-task preemption victims (facts i) cannot arise.
//   - Placement happens at the instant of the event that made it possible:
//     no eval-broker latency. A preempting allocation starts as soon as it is
//     placed (no kill_timeout); a migrated allocation's replacement is placed
//     in the same pass.
//   - Binpack: Nomad shuffles the feasible nodes and, for batch jobs, scores
//     only the first 2 it finds; the model draws 2 distinct feasible nodes
//     uniformly at random (the same distribution) from a seeded generator and
//     keeps the fuller one (fewest free healthy GPUs after placement).
//     PlacementBestFit scores every node instead.
//   - A job makes progress only while all its allocations run (a distributed
//     job waits for its last worker); GPU time held by a job placed in part is
//     reported as stalled.
//   - Allocations of the placing job are never victims, as in Nomad; since a
//     job's allocations share its priority (a change is in place), the
//     10-point gap already keeps them apart.
//   - Blocked evaluations keep their place (CreateIndex) when they block
//     again; a priority change or an evaluate creates a new one at the back of
//     its priority, as Nomad does.
package sim
