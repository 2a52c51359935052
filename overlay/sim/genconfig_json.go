package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"
)

// genConfigJSON is GenConfig as people write it in a scenario file:
// durations as Go/Nomad duration strings ("2h", "90m"), not nanoseconds.
type genConfigJSON struct {
	Seed              uint64    `json:"seed"`
	Days              float64   `json:"days"`
	GPUs              int       `json:"gpus"`
	Demand            float64   `json:"demand"`
	Allocated         float64   `json:"allocated"`
	TeamSpread        float64   `json:"team_spread"`
	DebugPerDay       float64   `json:"debug_per_day"`
	InteractivePerDay float64   `json:"interactive_per_day"`
	Resumable         float64   `json:"resumable"`
	HighInflation     float64   `json:"high_inflation"`
	DebugPriority     []int     `json:"debug_priority"` // [2]int in GenConfig: a slice, so that a third element is seen
	TrainPriority     []int     `json:"train_priority"`
	TrainSizes        []int     `json:"train_sizes"`
	TrainWeights      []float64 `json:"train_weights"`
	TrainWorkMin      string    `json:"train_work_min"`
	TrainWorkMax      string    `json:"train_work_max"`
	TrainCap          float64   `json:"train_cap"`
	Failures          int       `json:"failures"`
	Nodes             int       `json:"nodes"`
	RepairMin         string    `json:"repair_min"`
	RepairMax         string    `json:"repair_max"`
	TrainNotice       string    `json:"train_notice"`       // "0s": none
	InteractiveNotice string    `json:"interactive_notice"` // "0s": none
}

// MarshalJSON writes the configuration with snake_case keys and durations
// as strings, the form UnmarshalJSON reads.
func (g GenConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(genConfigJSON{Seed: g.Seed, Days: g.Days, GPUs: g.GPUs, Demand: g.Demand, Allocated: g.Allocated,
		TeamSpread: g.TeamSpread, DebugPerDay: g.DebugPerDay, InteractivePerDay: g.InteractivePerDay,
		Resumable: g.Resumable, HighInflation: g.HighInflation,
		DebugPriority: g.DebugPriority[:], TrainPriority: g.TrainPriority[:], TrainSizes: g.TrainSizes,
		TrainWeights: g.TrainWeights, TrainWorkMin: g.TrainWorkMin.String(), TrainWorkMax: g.TrainWorkMax.String(), TrainCap: g.TrainCap,
		Failures: g.Failures, Nodes: g.Nodes, RepairMin: g.RepairMin.String(), RepairMax: g.RepairMax.String(),
		TrainNotice: g.TrainNotice.String(), InteractiveNotice: g.InteractiveNotice.String()})
}

// UnmarshalJSON reads a configuration written by MarshalJSON or by hand.
// Keys left out keep the values g already has (start from DefaultGenConfig
// to override only some); unknown keys are an error.
func (g *GenConfig) UnmarshalJSON(b []byte) error {
	// Start from g's own values so that absent keys keep them.
	cur := genConfigJSON{Seed: g.Seed, Days: g.Days, GPUs: g.GPUs, Demand: g.Demand, Allocated: g.Allocated, TeamSpread: g.TeamSpread,
		DebugPerDay: g.DebugPerDay, InteractivePerDay: g.InteractivePerDay,
		Resumable: g.Resumable, HighInflation: g.HighInflation, DebugPriority: g.DebugPriority[:],
		TrainPriority: g.TrainPriority[:], TrainSizes: g.TrainSizes, TrainWeights: g.TrainWeights,
		TrainWorkMin: g.TrainWorkMin.String(), TrainWorkMax: g.TrainWorkMax.String(), TrainCap: g.TrainCap, Failures: g.Failures,
		Nodes: g.Nodes, RepairMin: g.RepairMin.String(), RepairMax: g.RepairMax.String(),
		TrainNotice: g.TrainNotice.String(), InteractiveNotice: g.InteractiveNotice.String()}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cur); err != nil {
		return fmt.Errorf("generate: %w (keys are snake_case, e.g. \"demand\", \"allocated\", \"train_work_min\"; \"demand\" counts all work, allocated and unallocated, and \"allocated\" the allocated part, both as multiples of capacity)", err)
	}
	durs := [6]time.Duration{}
	for k, s := range []string{cur.TrainWorkMin, cur.TrainWorkMax, cur.RepairMin, cur.RepairMax, cur.TrainNotice, cur.InteractiveNotice} {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			name := [...]string{"train_work_min", "train_work_max", "repair_min", "repair_max", "train_notice", "interactive_notice"}[k]
			return &GenConfigKeyError{name, fmt.Errorf("%q is not a duration; write it like \"2h\", \"90m\" or \"3d\" as \"72h\"", s)}
		}
		durs[k] = d
	}
	var ranges [2][2]int
	for k, r := range [][]int{cur.DebugPriority, cur.TrainPriority} {
		if len(r) != 2 {
			return &GenConfigKeyError{[...]string{"debug_priority", "train_priority"}[k],
				fmt.Errorf("%v: want a range [lo, hi] of two priorities, not %d", r, len(r))}
		}
		ranges[k] = [2]int{r[0], r[1]}
	}
	*g = GenConfig{Seed: cur.Seed, Days: cur.Days, GPUs: cur.GPUs, Demand: cur.Demand, Allocated: cur.Allocated, TeamSpread: cur.TeamSpread,
		DebugPerDay: cur.DebugPerDay, InteractivePerDay: cur.InteractivePerDay,
		Resumable: cur.Resumable, HighInflation: cur.HighInflation, DebugPriority: ranges[0],
		TrainPriority: ranges[1], TrainSizes: cur.TrainSizes, TrainWeights: cur.TrainWeights,
		TrainWorkMin: durs[0], TrainWorkMax: durs[1], TrainCap: cur.TrainCap, Failures: cur.Failures, Nodes: cur.Nodes,
		RepairMin: durs[2], RepairMax: durs[3], TrainNotice: durs[4], InteractiveNotice: durs[5], GPUsPerNode: g.GPUsPerNode}
	return nil
}

// GenConfigKeyError is a problem with the value of one key of a generator
// configuration in JSON.
type GenConfigKeyError struct {
	Key string
	Err error
}

func (e *GenConfigKeyError) Error() string { return "generate: " + e.Key + " " + e.Err.Error() }

// Unwrap returns the problem.
func (e *GenConfigKeyError) Unwrap() error { return e.Err }

// GenConfigKeys are the keys a scenario's generator settings may have, in
// the order of GenConfig's fields.
func GenConfigKeys() []string {
	t := reflect.TypeFor[genConfigJSON]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i], _, _ = strings.Cut(t.Field(i).Tag.Get("json"), ",")
	}
	return keys
}
