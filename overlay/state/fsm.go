package state

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/allot-sched/allot/budgets"
	memdb "github.com/hashicorp/go-memdb"
	"github.com/hashicorp/raft"
)

// Defaults for FSMConfig. The ledger keeps 14 days of 1-minute buckets:
// twice the default 7-day lookback window (docs/design.md, "Usage ledger").
const (
	DefaultBucket          = time.Minute
	DefaultRetention       = 14 * 24 * time.Hour
	DefaultDecisionLogSize = 10000
)

// FSMConfig must be identical on every server of a cluster: it shapes what
// Apply does.
type FSMConfig struct {
	Bucket          time.Duration // ledger bucket width
	Retention       time.Duration // how much ledger history is kept
	DecisionLogSize int           // decisions kept; older ones are dropped
	// MaxAdvance bounds how far one charge or demand entry may move the
	// ledger's newest bucket, and with it the horizon (default
	// DefaultMaxAdvance; see applyCharge for the exact rule).
	MaxAdvance time.Duration
	// MaxSkew is how far after an entry's Now (the leader's clock) a
	// charge or demand sample may end (default DefaultMaxSkew).
	MaxSkew time.Duration
}

func (c FSMConfig) withDefaults() FSMConfig {
	if c.Bucket <= 0 {
		c.Bucket = DefaultBucket
	}
	if c.Retention <= 0 {
		c.Retention = DefaultRetention
	}
	if c.DecisionLogSize <= 0 {
		c.DecisionLogSize = DefaultDecisionLogSize
	}
	if c.MaxAdvance <= 0 {
		c.MaxAdvance = DefaultMaxAdvance
	}
	if c.MaxSkew <= 0 {
		c.MaxSkew = DefaultMaxSkew
	}
	return c
}

// FSM is allot's raft state machine. raft calls Apply, Snapshot and Restore
// from its FSM goroutine; readers call Read and WithLedger from any
// goroutine. The ledger lives outside memdb (it is far too large for a row
// per bucket) and is guarded by mu.
type FSM struct {
	cfg FSMConfig

	mu     sync.RWMutex // guards db (the pointer) and ledger
	db     *memdb.MemDB
	ledger *budgets.Ledger
}

var _ raft.FSM = (*FSM)(nil)

// NewFSM returns an empty state.
func NewFSM(cfg FSMConfig) (*FSM, error) {
	cfg = cfg.withDefaults()
	db, err := memdb.NewMemDB(schema())
	if err != nil {
		return nil, fmt.Errorf("state schema: %w", err)
	}
	return &FSM{cfg: cfg, db: db, ledger: cfg.newLedger()}, nil
}

func (c FSMConfig) newLedger() *budgets.Ledger {
	return budgets.NewLedger(budgets.LedgerConfig{Bucket: c.Bucket, Retention: c.Retention, MaxAdvance: c.MaxAdvance})
}

// Config returns the configuration the FSM was built with, defaults filled.
func (f *FSM) Config() FSMConfig { return f.cfg }

// Apply applies one committed log entry. It returns nil, an error (the
// entry changed nothing, or, for batches, the joined errors of the items
// that were skipped), a ChargeResult for charge and demand entries, or a
// PassResult for a pass.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	return f.ApplyEntry(l.Data)
}

// ApplyEntry applies an encoded entry (type byte + JSON). It is Apply
// without the raft envelope, for tests and fuzzing.
func (f *FSM) ApplyEntry(data []byte) any {
	if len(data) == 0 {
		return fmt.Errorf("%w: empty entry", ErrBadEntry)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, body := MessageType(data[0]), data[1:]
	apply, ok := appliers[t]
	if !ok {
		return fmt.Errorf("%w: unknown entry type %d (known: 1-%d)", ErrBadEntry, data[0], PassType)
	}
	return apply(f, body)
}

// appliers apply each entry type's body.
var appliers = map[MessageType]func(*FSM, []byte) any{
	BudgetsApplyType:   (*FSM).applyBudgets,
	ChargeType:         (*FSM).applyCharge,
	DemandType:         (*FSM).applyDemand,
	JobUpsertType:      (*FSM).applyJobUpsert,
	JobDeleteType:      (*FSM).applyJobDelete,
	AllocUpsertType:    (*FSM).applyAllocUpsert,
	NodeUpsertType:     (*FSM).applyNodeUpsert,
	DecisionAppendType: (*FSM).applyDecisionAppend,
	PrioritiesType:     (*FSM).applyPriorities,
	PlanRecordType:     (*FSM).applyPlanRecord,
	ServerUpsertType:   (*FSM).applyServerUpsert,
	DrainObserveType:   (*FSM).applyDrainObserve,
	DrainReturnType:    (*FSM).applyDrainReturn,
	PassType:           (*FSM).applyPass,
}

// Snapshot captures the state cheaply: a memdb snapshot (a pointer) and a
// copy of the ledger's bytes. Persist does the encoding and the I/O.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ledger, err := f.ledger.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("snapshot ledger: %w", err)
	}
	return &fsmSnapshot{db: f.db.Snapshot(), ledger: ledger}, nil
}

// Restore replaces the whole state with a snapshot written by Persist.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	db, ledger, err := readSnapshot(rc, f.cfg)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.db, f.ledger = db, ledger
	f.mu.Unlock()
	return nil
}

// Read returns a consistent read-only view of the tables.
func (f *FSM) Read() *View {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return &View{txn: f.db.Txn(false)}
}

// WithLedger calls fn with the ledger under a read lock; fn must not keep
// the ledger or modify it.
func (f *FSM) WithLedger(fn func(*budgets.Ledger)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.ledger)
}
