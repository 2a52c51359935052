package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// EventKind is what an event log line records.
type EventKind string

// The kinds of an event log. One schema serves both sides of a fidelity
// run: `allot sim -events FILE` writes it from the model, the fidelity
// harness (e2e/fidelity_test.go) from a real Nomad's allocations and allot's
// decision log.
const (
	// EventSubmit: the job was registered with Nomad. Budget is the leaf it
	// is charged to ("" for unallocated work), GPUs its GPUs in all.
	EventSubmit EventKind = "submit"
	// EventPlace: an allocation of the job was placed on Node with GPUs GPUs.
	EventPlace EventKind = "place"
	// EventStart: every allocation of the job runs; its work clock starts
	// (and, for allocated work, its protected window opens).
	EventStart EventKind = "start"
	// EventStop: allocation Alloc left its GPUs, for Reason (a StopReason
	// name: finished, nomad-preemption, time-slice, drain, reservation,
	// release, other, drain-deadline-kill, job-update). By is the job it was stopped for (time
	// slicing, reservation) or preempted by (Nomad's preemption), when known;
	// a release (rule 5c: a job placed in part gives its GPUs back) has none.
	EventStop EventKind = "stop"
	// EventDone: the job finished its work (Reason "finished") or was killed
	// without a replacement (Reason "drain-deadline-kill").
	EventDone EventKind = "done"
	// EventNode: Node's scheduling eligibility changed to Eligible.
	EventNode EventKind = "node"
	// EventHealth: GPU GPU of Node (-1: all of them) turned healthy or
	// unhealthy (Eligible carries the health; Reason the fault).
	EventHealth EventKind = "health"
)

// Event is one line of an event log (JSON lines). Times are trace seconds
// since the start of the trace: the harness converts its wall clock back
// with its time-compression factor, so both sides' logs read alike.
type Event struct {
	T    float64   `json:"t"`
	Kind EventKind `json:"kind"`
	Job  string    `json:"job,omitempty"`
	// Budget is the budget leaf of a submit ("" for unallocated work).
	Budget string `json:"budget,omitempty"`
	// GPUs: a submit's GPUs in all, a place's GPUs.
	GPUs int `json:"gpus,omitempty"`
	// GPU is a health event's GPU index (-1: every GPU of the node).
	GPU   *int   `json:"gpu,omitempty"`
	Alloc string `json:"alloc,omitempty"`
	Node  string `json:"node,omitempty"`
	// Reason: why a stop or done happened, or a health event's fault.
	Reason string `json:"reason,omitempty"`
	By     string `json:"by,omitempty"`
	// Ran and Lost are on the stop that interrupted a run of the job (its
	// first allocation stopped while every one ran; the model's log only):
	// Ran is how long that run had run, in seconds, and Lost the work the
	// stop threw away, in GPU-seconds (all of the run for a job that is
	// not resumable, at most -checkpoint-loss of it for one that is, none
	// when a checkpoint notice saved it). Summed over the log from the
	// end of the warm-up, Lost / 3600 is the run's "lost GPU hours".
	Ran  float64 `json:"ran,omitempty"`
	Lost float64 `json:"lost,omitempty"`
	// Eligible is a node event's eligibility, or a health event's health.
	Eligible *bool `json:"eligible,omitempty"`
}

// EventWriter writes an event log as JSON lines. Its first error stops
// further writes; Flush returns it.
type EventWriter struct {
	w   *bufio.Writer
	buf []byte
	err error
}

// NewEventWriter writes to w; call Flush at the end.
func NewEventWriter(w io.Writer) *EventWriter { return &EventWriter{w: bufio.NewWriter(w)} }

// Write appends one event.
func (w *EventWriter) Write(e *Event) {
	if w.err != nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		w.err = err
		return
	}
	w.buf = append(append(w.buf[:0], b...), '\n')
	_, w.err = w.w.Write(w.buf)
}

// Flush writes what is buffered and returns the first error.
func (w *EventWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// ReadEvents reads an event log. A line that is not an event is an error
// naming its line, and, for JSON syntax, its column. Blank lines are skipped.
func ReadEvents(r io.Reader) ([]Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []Event
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var e Event
		if err := dec.Decode(&e); err != nil {
			return nil, eventLineErr(line, err)
		}
		if err := e.check(); err != nil {
			return nil, &EventLogError{Line: line, Err: err}
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// EventLogError is a line of an event log that is not an event.
type EventLogError struct {
	Line, Col int // Col 0: the line as a whole
	Err       error
}

func (e *EventLogError) Error() string { return "line " + e.Pos()[1:] + ": " + e.Err.Error() }

// Pos is ":line" or ":line:col", to follow a file name.
func (e *EventLogError) Pos() string {
	if e.Col > 0 {
		return fmt.Sprintf(":%d:%d", e.Line, e.Col)
	}
	return fmt.Sprintf(":%d", e.Line)
}

func (e *EventLogError) Unwrap() error { return e.Err }

func eventLineErr(line int, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &EventLogError{Line: line, Col: int(se.Offset), Err: err}
	case errors.As(err, &te):
		return &EventLogError{Line: line, Col: int(te.Offset), Err: fmt.Errorf("%s: want %s, not %s", te.Field, te.Type, te.Value)}
	}
	return &EventLogError{Line: line, Err: fmt.Errorf("%v (an event is {\"t\": seconds, \"kind\": submit|place|start|stop|done|node|health, ...})", err)}
}

// check says what is wrong with a decoded event.
func (e *Event) check() error {
	switch e.Kind {
	case EventSubmit, EventPlace, EventStart, EventStop, EventDone:
		if e.Job == "" {
			return fmt.Errorf("%s event at t=%s has no job", e.Kind, ftoa(e.T))
		}
	case EventNode, EventHealth:
		if e.Node == "" {
			return fmt.Errorf("%s event at t=%s has no node", e.Kind, ftoa(e.T))
		}
		if e.Eligible == nil {
			return fmt.Errorf("%s event at t=%s has no \"eligible\" (true or false)", e.Kind, ftoa(e.T))
		}
	default:
		return fmt.Errorf("kind %q: want one of submit, place, start, stop, done, node, health", e.Kind)
	}
	if e.T < 0 {
		return fmt.Errorf("%s event of %s: time %s is negative; times count from the start of the trace", e.Kind, e.Job+e.Node, ftoa(e.T))
	}
	return nil
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// emit hands an event to the run's event sink, if it has one.
func (s *State) emit(e Event) {
	e.T = float64(s.now)
	s.opts.Events(&e)
}

// jobBudget is the budget leaf a job's GPU time is charged to, "" for
// unallocated work.
func (s *State) jobBudget(j *job) string {
	if j.leaf < 0 {
		return ""
	}
	return j.spec.Budget
}

func (s *State) emitSubmit(j *job) {
	if s.opts.Events != nil {
		s.emit(Event{Kind: EventSubmit, Job: j.spec.ID, Budget: s.jobBudget(j), GPUs: j.spec.TotalGPUs()})
	}
}

func (s *State) emitPlace(j *job, a int32) {
	if s.opts.Events != nil {
		al := &s.allocs[a]
		s.emit(Event{Kind: EventPlace, Job: j.spec.ID, Alloc: "a" + itoa(int(a)), Node: s.nodes[al.node].id, GPUs: int(al.gpus)})
	}
}

func (s *State) emitStart(j *job) {
	if s.opts.Events != nil {
		s.emit(Event{Kind: EventStart, Job: j.spec.ID})
	}
}

// emitStop logs the stop of allocation a; ran and lost (seconds,
// GPU-seconds) describe the run it interrupted, if it did (interrupt).
func (s *State) emitStop(a int32, ran, lost int64) {
	if s.opts.Events == nil {
		return
	}
	al := &s.allocs[a]
	if al.endReason == StopEnd {
		return // the run's end, not a stop
	}
	e := Event{Kind: EventStop, Job: s.jobs[al.job].spec.ID, Alloc: "a" + itoa(int(a)), Node: s.nodes[al.node].id,
		Reason: al.endReason.String(), Ran: float64(ran), Lost: float64(lost)}
	if al.preemptedBy >= 0 {
		e.By = s.jobs[al.preemptedBy].spec.ID
	} else if s.stopFor >= 0 {
		e.By = s.jobs[s.stopFor].spec.ID
	}
	s.emit(e)
}

func (s *State) emitDone(j *job, st JobStatus) {
	if s.opts.Events != nil {
		why := StopFinished
		if st == StatusDead {
			why = StopKilled
		}
		s.emit(Event{Kind: EventDone, Job: j.spec.ID, Reason: why.String()})
	}
}

func (s *State) emitNode(n int32, eligible bool) {
	if s.opts.Events != nil {
		s.emit(Event{Kind: EventNode, Node: s.nodes[n].id, Eligible: &eligible})
	}
}

func (s *State) emitHealth(n int32, gpu int, healthy bool, reason string) {
	if s.opts.Events != nil {
		s.emit(Event{Kind: EventHealth, Node: s.nodes[n].id, GPU: &gpu, Reason: reason, Eligible: &healthy})
	}
}

// StopAllocsFor is StopAllocs for a stop that makes room for job forJob
// (-1: none): the event log names it as the stop's By.
func (s *State) StopAllocsFor(ids []int32, why StopReason, forJob int32) {
	s.stopFor = forJob
	s.StopAllocs(ids, why)
	s.stopFor = -1
}
