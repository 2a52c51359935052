package sim

import (
	"fmt"
	"strings"
	"time"
)

// Class labels a job for reporting only; no policy reads it.
type Class uint8

// Job classes of a trace.
const (
	ClassDebug Class = iota
	ClassTrain
	ClassInteractive
	ClassOther
	numClasses
)

var classNames = [numClasses]string{"debug", "train", "interactive", "other"}

func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return "unknown"
}

// ParseClass reads a class label.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("class %s: want one of debug, train, interactive, other", quote(s))
}

// Level is a baseline priority: the world before allot let users pick one.
type Level uint8

// Baseline levels.
const (
	LevelLow Level = iota
	LevelNormal
	LevelHigh
	numLevels
)

var levelNames = [numLevels]string{"low", "normal", "high"}

func (l Level) String() string {
	if l < numLevels {
		return levelNames[l]
	}
	return "unknown"
}

// ParseLevel reads a baseline priority level.
func ParseLevel(s string) (Level, error) {
	for i, n := range levelNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Level(i), nil
		}
	}
	return 0, fmt.Errorf("baseline priority %s: want one of low, normal, high", quote(s))
}

// JobSpec is one job of a trace: what the user submitted.
type JobSpec struct {
	ID     string
	Submit time.Duration // since the start of the trace
	// Budget is the leaf the job names ("" for none: unallocated).
	Budget string
	Class  Class
	// Count allocations of GPUs each (one task group).
	Count int
	GPUs  int
	// Work is the wall time the job needs with all its allocations running.
	Work       time.Duration
	MinRuntime time.Duration // 0: unallocated
	Resumable  bool
	// Priority orders jobs of the same budget leaf (meta priority, 0-100).
	Priority int
	// Baseline is the priority level the job has under the baseline policy.
	Baseline Level
	// Pool is the Nomad node pool the job names (its node_pool); "" is
	// Nomad's "default". Nomad places a job only on nodes of its pool.
	Pool string
	// Model is the GPU model its device ask is constrained to ("" for any),
	// as a job's `constraint { attribute = "${device.model}" }` does.
	Model string
	// Signal and Notice are the job's checkpoint_signal and
	// checkpoint_notice ("" and 0: none): the notice it needs to save all
	// its work before a stop allot plans (a notice the policy caps shorter
	// saves nothing).
	Signal string
	Notice time.Duration
	// KillTimeout is the job's Nomad kill_timeout (0: not declared, Nomad's
	// DefaultKillTimeout): how long a stopped task has, after Nomad's
	// kill_signal, before it is killed (killtimeout.go).
	KillTimeout time.Duration
	// Line is the trace file's line the job was read from (0 for a job not
	// read from a file), for messages that point at it.
	Line int
}

// TotalGPUs is Count × GPUs.
func (j *JobSpec) TotalGPUs() int { return j.Count * j.GPUs }

// Validate says what is wrong with the spec, if anything.
func (j *JobSpec) Validate() error {
	switch {
	case j.ID == "":
		return fmt.Errorf("job id is empty; give every job a unique id")
	case j.Submit < 0:
		return fmt.Errorf("job %s: submit time %s is negative; times count from the start of the trace", quote(j.ID), j.Submit)
	case j.Count < 1 || j.Count > 10000:
		return fmt.Errorf("job %s: count %d must be between 1 and 10000", quote(j.ID), j.Count)
	case j.GPUs < 1 || j.GPUs > 64:
		return fmt.Errorf("job %s: gpus per allocation %d must be between 1 and 64", quote(j.ID), j.GPUs)
	case j.Work <= 0:
		return fmt.Errorf("job %s: work duration %s must be positive", quote(j.ID), j.Work)
	case j.MinRuntime < 0:
		return fmt.Errorf("job %s: min_runtime %s must be 0 (unallocated) or positive", quote(j.ID), j.MinRuntime)
	case j.Priority < 0 || j.Priority > 100:
		return fmt.Errorf("job %s: priority %d must be between 0 and 100", quote(j.ID), j.Priority)
	case j.Notice < 0:
		return fmt.Errorf("job %s: checkpoint_notice %s must be positive (or absent: no notice)", quote(j.ID), j.Notice)
	case j.Signal != "" && j.Notice == 0:
		return fmt.Errorf("job %s: checkpoint_signal %s without checkpoint_notice; give both (e.g. 5m) or neither", quote(j.ID), j.Signal)
	case j.Signal == "" && j.Notice > 0:
		return fmt.Errorf("job %s: checkpoint_notice %s without checkpoint_signal; give both (e.g. SIGUSR1) or neither", quote(j.ID), j.Notice)
	case j.KillTimeout < 0:
		return fmt.Errorf("job %s: kill_timeout %s must be positive (or absent: Nomad's default %s)", quote(j.ID), j.KillTimeout, DefaultKillTimeout)
	case j.Class >= numClasses:
		return fmt.Errorf("job %s: unknown class %d", quote(j.ID), j.Class)
	case j.Baseline >= numLevels:
		return fmt.Errorf("job %s: unknown baseline level %d", quote(j.ID), j.Baseline)
	case j.Pool == "all":
		return fmt.Errorf("job %s: pool \"all\" (Nomad's built-in pool of every node) is not modelled; name the node pool the job runs in, or leave it empty for \"default\"", quote(j.ID))
	case j.Pool != "" && !validPoolName(j.Pool):
		return fmt.Errorf("job %s: pool %s must be 1 to 128 of a-z, A-Z, 0-9, '_' and '-' (a Nomad node pool name)", quote(j.ID), quote(j.Pool))
	case strings.TrimSpace(j.Model) != j.Model:
		return fmt.Errorf("job %s: model %s has leading or trailing spaces; give the GPU model as the nodes name it, e.g. \"h100\"", quote(j.ID), quote(j.Model))
	}
	return nil
}

// HealthEvent turns GPUs of a node unhealthy or healthy again.
type HealthEvent struct {
	At      time.Duration
	Node    string
	Healthy bool
	// GPU is the instance index, or -1 for every GPU of the node.
	GPU    int
	Reason string
	Line   int // the trace file's line, as JobSpec.Line
}

// Trace is a workload: jobs sorted by submit time, and node health events
// sorted by time.
type Trace struct {
	Jobs   []JobSpec
	Health []HealthEvent
	// Skipped counts invalid rows dropped by a lenient reader, and the jobs
	// and health events Check dropped with SkipInvalid.
	Skipped int
}

// End is the time of the last submission or health event.
func (t *Trace) End() time.Duration {
	var end time.Duration
	if n := len(t.Jobs); n > 0 {
		end = t.Jobs[n-1].Submit
	}
	if n := len(t.Health); n > 0 {
		end = max(end, t.Health[n-1].At)
	}
	return end
}

// NodePool is the Nomad node pool the job is placed in: its Pool, or
// "default" when it names none (Nomad's rule for a job without node_pool).
func (j *JobSpec) NodePool() string {
	if j.Pool == "" {
		return "default"
	}
	return j.Pool
}
