package sim

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Trace file columns (CSV header names, JSONL keys). A row with a node is a
// health event (time in submit or at); any other row is a job.
var traceColumns = []string{"submit", "job", "budget", "class", "count", "gpus", "work", "min_runtime",
	"resumable", "priority", "baseline", "node", "health", "gpu", "reason"}

// ErrInvalidTrace is wrapped by every error about a trace's content.
var ErrInvalidTrace = errors.New("invalid trace")

// ReadOptions controls trace reading.
type ReadOptions struct {
	// SkipInvalid drops invalid rows and counts them in Trace.Skipped instead
	// of failing on the first.
	SkipInvalid bool
}

// ReadCSV reads a trace in CSV with a header row naming the columns (any
// order; unknown names are an error). Times and durations are Go durations
// ("90m") or plain seconds.
func ReadCSV(r io.Reader, opt ReadOptions) (*Trace, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%w: line 1: reading the header: %v", ErrInvalidTrace, err)
	}
	col := map[string]int{}
	for k, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if !slices.Contains(traceColumns, h) {
			return nil, fmt.Errorf("%w: line 1: unknown column %q; valid columns: %s", ErrInvalidTrace, h,
				strings.Join(traceColumns, ", "))
		}
		col[h] = k
	}
	tr := &Trace{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			if !opt.SkipInvalid {
				return nil, fmt.Errorf("%w: line %d: %v", ErrInvalidTrace, line, err)
			}
			tr.Skipped++
			continue
		}
		get := func(name string) string {
			if k, ok := col[name]; ok && k < len(rec) {
				return strings.TrimSpace(rec[k])
			}
			return ""
		}
		if err := tr.addRow(get); err != nil {
			if !opt.SkipInvalid {
				return nil, fmt.Errorf("%w: line %d: %v", ErrInvalidTrace, line, err)
			}
			tr.Skipped++
		}
	}
	tr.sort()
	return tr, nil
}

// ReadJSONL reads a trace with one JSON object per line, keyed by the CSV
// column names ("at" is accepted for a health event's time). Blank lines are
// skipped.
func ReadJSONL(r io.Reader, opt ReadOptions) (*Trace, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	tr := &Trace{}
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var obj map[string]any
		err := json.Unmarshal(b, &obj)
		if err == nil {
			err = tr.addRow(func(name string) string {
				v, ok := obj[name]
				if !ok && name == "submit" {
					v, ok = obj["at"]
				}
				if !ok || v == nil {
					return ""
				}
				switch x := v.(type) {
				case string:
					return strings.TrimSpace(x)
				case bool:
					return strconv.FormatBool(x)
				case float64:
					return strconv.FormatFloat(x, 'f', -1, 64)
				}
				return fmt.Sprint(v)
			})
		}
		if err != nil {
			if !opt.SkipInvalid {
				return nil, fmt.Errorf("%w: line %d: %v", ErrInvalidTrace, line, err)
			}
			tr.Skipped++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidTrace, err)
	}
	tr.sort()
	return tr, nil
}

func (tr *Trace) sort() {
	tr.Jobs = sortJobs(tr.Jobs)
	slices.SortStableFunc(tr.Health, func(a, b HealthEvent) int { return compareDur(a.At, b.At) })
}

// sortJobs orders jobs by submit time, keeping the order of equal times
// (a stable sort). It sorts (submit, index) keys and moves each JobSpec
// once: a stable sort of the records themselves moves them O(log n) times.
func sortJobs(jobs []JobSpec) []JobSpec {
	if slices.IsSortedFunc(jobs, func(a, b JobSpec) int { return compareDur(a.Submit, b.Submit) }) {
		return jobs
	}
	type key struct {
		at time.Duration
		i  int32
	}
	keys := make([]key, len(jobs))
	for i := range jobs {
		keys[i] = key{jobs[i].Submit, int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := compareDur(a.at, b.at); c != 0 {
			return c
		}
		return int(a.i - b.i)
	})
	out := make([]JobSpec, len(jobs))
	for k, key := range keys {
		out[k] = jobs[key.i]
	}
	return out
}

func compareDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseDur reads a Go duration or plain seconds.
func parseDur(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("%s is missing; give a duration such as \"90m\" or seconds", name)
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if f < 0 || f > 1e10 {
			return 0, fmt.Errorf("%s %q is out of range; give 0 to 10^10 seconds", name, s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration; give a Go duration such as \"90m\" or seconds", name, s)
	}
	return d, nil
}

func parseInt(name, s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not an integer", name, s)
	}
	return v, nil
}

func parseBool(name, s string) (bool, error) {
	switch strings.ToLower(s) {
	case "", "false", "0", "no":
		return false, nil
	case "true", "1", "yes":
		return true, nil
	}
	return false, fmt.Errorf("%s %q: want true or false", name, s)
}

// addRow parses one row, a job or a health event.
func (tr *Trace) addRow(get func(string) string) error {
	if node := get("node"); node != "" {
		return tr.addHealth(node, get)
	}
	var j JobSpec
	var err error
	j.ID = get("job")
	if j.Submit, err = parseDur("submit", get("submit")); err != nil {
		return err
	}
	j.Budget = get("budget")
	if c := get("class"); c != "" {
		if j.Class, err = ParseClass(c); err != nil {
			return err
		}
	} else {
		j.Class = ClassOther
	}
	if j.Count, err = parseInt("count", get("count"), 1); err != nil {
		return err
	}
	if j.GPUs, err = parseInt("gpus", get("gpus"), 0); err != nil {
		return err
	}
	if j.Work, err = parseDur("work", get("work")); err != nil {
		return err
	}
	if mr := get("min_runtime"); mr != "" {
		if j.MinRuntime, err = parseDur("min_runtime", mr); err != nil {
			return err
		}
	}
	if j.Resumable, err = parseBool("resumable", get("resumable")); err != nil {
		return err
	}
	if j.Priority, err = parseInt("priority", get("priority"), 50); err != nil {
		return err
	}
	j.Baseline = LevelNormal
	if b := get("baseline"); b != "" {
		if j.Baseline, err = ParseLevel(b); err != nil {
			return err
		}
	}
	if err := j.Validate(); err != nil {
		return err
	}
	tr.Jobs = append(tr.Jobs, j)
	return nil
}

func (tr *Trace) addHealth(node string, get func(string) string) error {
	h := HealthEvent{Node: node, Reason: get("reason"), GPU: -1}
	var err error
	if h.At, err = parseDur("submit (the event's time)", get("submit")); err != nil {
		return err
	}
	switch strings.ToLower(get("health")) {
	case "healthy":
		h.Healthy = true
	case "unhealthy":
	default:
		return fmt.Errorf("node %q: health %q: want healthy or unhealthy", node, get("health"))
	}
	if h.GPU, err = parseInt("gpu", get("gpu"), -1); err != nil {
		return err
	}
	if h.GPU < -1 || h.GPU > 63 {
		return fmt.Errorf("node %q: gpu %d: want an instance index 0-63, or -1 (or empty) for the whole node", node, h.GPU)
	}
	tr.Health = append(tr.Health, h)
	return nil
}

func fmtDur(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// WriteCSV writes the trace as CSV, jobs then health events, times in seconds.
func WriteCSV(w io.Writer, tr *Trace) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(traceColumns); err != nil {
		return err
	}
	row := make([]string, len(traceColumns))
	for k := range tr.Jobs {
		j := &tr.Jobs[k]
		row = append(row[:0], fmtDur(j.Submit), j.ID, j.Budget, j.Class.String(), strconv.Itoa(j.Count),
			strconv.Itoa(j.GPUs), fmtDur(j.Work), fmtDur(j.MinRuntime), strconv.FormatBool(j.Resumable),
			strconv.Itoa(j.Priority), j.Baseline.String(), "", "", "", "")
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for _, h := range tr.Health {
		health := "unhealthy"
		if h.Healthy {
			health = "healthy"
		}
		row = append(row[:0], fmtDur(h.At), "", "", "", "", "", "", "", "", "", "", h.Node, health,
			strconv.Itoa(h.GPU), h.Reason)
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteJSONL writes the trace as JSON lines, jobs then health events.
func WriteJSONL(w io.Writer, tr *Trace) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	type jobLine struct {
		Submit     int64  `json:"submit"`
		Job        string `json:"job"`
		Budget     string `json:"budget,omitempty"`
		Class      string `json:"class"`
		Count      int    `json:"count"`
		GPUs       int    `json:"gpus"`
		Work       int64  `json:"work"`
		MinRuntime int64  `json:"min_runtime"`
		Resumable  bool   `json:"resumable"`
		Priority   int    `json:"priority"`
		Baseline   string `json:"baseline"`
	}
	type healthLine struct {
		At     int64  `json:"at"`
		Node   string `json:"node"`
		Health string `json:"health"`
		GPU    int    `json:"gpu"`
		Reason string `json:"reason,omitempty"`
	}
	for k := range tr.Jobs {
		j := &tr.Jobs[k]
		if err := enc.Encode(jobLine{int64(j.Submit / time.Second), j.ID, j.Budget, j.Class.String(), j.Count,
			j.GPUs, int64(j.Work / time.Second), int64(j.MinRuntime / time.Second), j.Resumable, j.Priority,
			j.Baseline.String()}); err != nil {
			return err
		}
	}
	for _, h := range tr.Health {
		health := "unhealthy"
		if h.Healthy {
			health = "healthy"
		}
		if err := enc.Encode(healthLine{int64(h.At / time.Second), h.Node, health, h.GPU, h.Reason}); err != nil {
			return err
		}
	}
	return bw.Flush()
}
