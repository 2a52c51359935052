package state

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/allot-sched/allot/overlay/policy"
	memdb "github.com/hashicorp/go-memdb"
)

// Checkpoint notices in flight (docs/design.md, "Notice before a stop").
// The leader that signals a job records the notice with the pass that sent
// the signal (PassRequest.Notices), so that the next leader, after a
// leader change or a restart, knows it was sent, when its stop is due and
// whom the stop makes room for: it neither signals the job again, nor
// stops it before the deadline, nor gives the waiting job's place away.

// TableNotices holds one Notice per job under a checkpoint notice.
const TableNotices = "notices"

// MaxNoticeAllocs bounds the allocations of one notice (a job's
// allocations signalled at once; the largest gangs have a few hundred).
const MaxNoticeAllocs = 4096

// Notice is a checkpoint notice under way (policy.Notice): JobID's
// allocations Allocs were signalled at SentAt and are stopped at Deadline
// for Stop, to make room for For ("" for a drain).
type Notice struct {
	JobID    string
	For      string `json:",omitempty"`
	Allocs   []string
	SentAt   time.Time
	Deadline time.Time
	Stop     NoticeStop
}

// NoticeStop is the reason of the stop a notice announces (a policy.Reason
// whose code is one of noticeStopKinds, by name: the log never depends on
// the policy's numbering of its codes).
type NoticeStop struct {
	Kind   string
	Job    string    `json:",omitempty"`
	Node   string    `json:",omitempty"`
	At     time.Time `json:",omitzero"`
	N      int       `json:",omitempty"`
	Detail string    `json:",omitempty"`
}

// noticeStopKinds names the stop reasons a notice can announce: time
// slicing (rule 5), a reservation, a drain. A name, once written, is part
// of the log format: never rename one.
var noticeStopKinds = map[policy.ReasonCode]string{
	policy.ReasonVictim:           "victim",
	policy.ReasonVictimOwn:        "victim_own",
	policy.ReasonVictimPartial:    "victim_partial",
	policy.ReasonReservationStop:  "reservation",
	policy.ReasonDrainStop:        "drain",
	policy.ReasonDrainUnallocated: "drain_unallocated",
	policy.ReasonNomadDrain:       "nomad_drain",
}

// NoticeRow is the replicated row of a policy notice; ok is false for a
// stop reason no notice announces (the policy never plans one).
func NoticeRow(n *policy.Notice) (Notice, bool) {
	kind, ok := noticeStopKinds[n.Reason.Code]
	if !ok {
		return Notice{}, false
	}
	r := n.Reason
	return Notice{JobID: n.Job, For: n.For, Allocs: slices.Clone(n.Allocs), SentAt: n.SentAt.UTC(), Deadline: n.Deadline.UTC(),
		Stop: NoticeStop{Kind: kind, Job: r.Job, Node: r.Node, At: r.At.UTC(), N: r.N, Detail: r.Detail}}, true
}

// Policy is the row as the policy's notice (what a new leader's
// policy.Carry starts from).
func (n *Notice) Policy() policy.Notice {
	var code policy.ReasonCode
	for c, name := range noticeStopKinds {
		if name == n.Stop.Kind {
			code = c
		}
	}
	s := n.Stop
	return policy.Notice{Job: n.JobID, For: n.For, Allocs: slices.Clone(n.Allocs), SentAt: n.SentAt, Deadline: n.Deadline,
		Reason: policy.Reason{Code: code, Job: s.Job, Node: s.Node, At: s.At, N: s.N, Detail: s.Detail}}
}

func noticesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{Name: TableNotices, Indexes: map[string]*memdb.IndexSchema{"id": idIndex("JobID")}}
}

// Notices returns the checkpoint notices in flight, by job ID.
func (v *View) Notices() []*Notice { return all[Notice](v, TableNotices) }

// replaceNotices replaces the stored notices with ns, refusing the entry
// for the first invalid one.
func replaceNotices(txn *memdb.Txn, ns []Notice) error {
	if _, err := txn.DeleteAll(TableNotices, "id"); err != nil {
		return err
	}
	for i := range ns {
		n := ns[i]
		if err := checkNotice(&n); err != nil {
			return fmt.Errorf("notice %d (job %s): %w", i, QuotePrefix(n.JobID), err)
		}
		n.Allocs = slices.Clone(n.Allocs)
		n.SentAt, n.Deadline, n.Stop.At = n.SentAt.UTC(), n.Deadline.UTC(), n.Stop.At.UTC()
		if raw, err := txn.First(TableNotices, "id", n.JobID); err != nil {
			return err
		} else if raw != nil {
			return fmt.Errorf("notice %d: a second notice for job %s (one per job)", i, QuotePrefix(n.JobID))
		}
		if err := txn.Insert(TableNotices, &n); err != nil {
			return err
		}
	}
	return nil
}

// checkNotice checks a notice row before it is stored.
func checkNotice(n *Notice) error {
	if n.JobID == "" {
		return fmt.Errorf("no job ID")
	}
	for _, f := range []struct {
		field, s string
	}{{"job", n.JobID}, {"for", n.For}, {"stop.job", n.Stop.Job}, {"stop.node", n.Stop.Node}, {"stop.detail", n.Stop.Detail}} {
		if err := CheckSize(f.field, f.s, MaxIDBytes); err != nil {
			return err
		}
	}
	if len(n.Allocs) == 0 || len(n.Allocs) > MaxNoticeAllocs {
		return outOfBounds("%d allocations: want 1 to %d", len(n.Allocs), MaxNoticeAllocs)
	}
	for k, a := range n.Allocs {
		if a == "" {
			return fmt.Errorf("allocation %d has no ID", k)
		}
		if err := CheckSize(fmt.Sprintf("allocs[%d]", k), a, MaxIDBytes); err != nil {
			return err
		}
	}
	if n.SentAt.IsZero() || n.Deadline.Before(n.SentAt) {
		return fmt.Errorf("deadline %s before it was sent at %s: want a send time and a deadline no earlier",
			n.Deadline.UTC().Format(time.RFC3339), n.SentAt.UTC().Format(time.RFC3339))
	}
	var names []string
	for _, name := range noticeStopKinds {
		if name == n.Stop.Kind {
			return nil
		}
		names = append(names, name)
	}
	slices.Sort(names)
	return fmt.Errorf("stop kind %q: want one of %s", n.Stop.Kind, strings.Join(names, ", "))
}
