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
	"unicode/utf8"

	"github.com/allot-sched/allot/budgets"
	"github.com/allot-sched/allot/overlay/contract"
)

// Trace file columns (CSV header names, JSONL keys). A row with a node is a
// health event (time in submit or at); any other row is a job.
var traceColumns = []string{"submit", "job", "budget", "class", "count", "gpus", "work", "min_runtime",
	"resumable", "priority", "baseline", "pool", "model", "checkpoint_signal", "checkpoint_notice", "kill_timeout", "node", "health", "gpu", "reason"}

// jobColumns are the columns a job row must give (count, min_runtime and the
// rest have defaults); healthColumns are those of a health row only.
var (
	jobColumns    = []string{"submit", "job", "gpus", "work"}
	healthColumns = []string{"node", "health", "gpu", "reason"}
)

// ReadOptions controls trace reading.
type ReadOptions struct {
	// SkipInvalid drops invalid rows and counts them in Trace.Skipped instead
	// of failing on the first.
	SkipInvalid bool
}

// ReadCSV reads a trace in CSV with a header row naming the columns (any
// order; unknown names are an error). Every row has as many fields as the
// header. Times and durations are Go durations ("90m") or plain seconds.
// Errors are *TraceError values naming the line (and the column where the
// CSV itself is malformed).
func ReadCSV(r io.Reader, opt ReadOptions) (*Trace, error) {
	br := bufio.NewReader(r)
	if err := sniff(br, "CSV"); err != nil {
		return nil, err
	}
	if bom, _ := br.Peek(3); string(bom) == "\uFEFF" { // spreadsheets start their CSV with a byte order mark
		_, _ = br.Discard(3)
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	switch {
	case err == io.EOF:
		return nil, traceErr(1, 0, "the file is empty; a CSV trace starts with a header row naming its columns, e.g. %s",
			strings.Join(jobColumns, ","))
	case err != nil:
		return nil, csvErr(err)
	}
	col, err := readHeader(header)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(header))
	for name, k := range col {
		names[k] = name
	}
	tr := &Trace{}
	rows := newRowChecker(opt)
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil { // a *csv.ParseError, with its own line (FieldPos panics after one)
			if err = rows.skip(tr, csvErr(err)); err != nil {
				return nil, err
			}
			continue
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			if err = rows.skip(tr, fieldCountErr(line, rec, names)); err != nil {
				return nil, err
			}
			continue
		}
		get := func(name string) string {
			if k, ok := col[name]; ok {
				return strings.TrimSpace(rec[k])
			}
			return ""
		}
		if err := rows.add(tr, line, get); err != nil {
			return nil, err
		}
	}
	return rows.finish(tr)
}

// readHeader maps each column name of a CSV header to its field index.
func readHeader(header []string) (map[string]int, error) {
	col := map[string]int{}
	for k, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if first, dup := col[h]; dup {
			return nil, traceErr(1, 0, "column %s is both field %d and field %d of the header; name each column once", quote(h), first+1, k+1)
		}
		if !slices.Contains(traceColumns, h) {
			hint := ""
			if near := budgets.Nearest(h, traceColumns); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return nil, traceErr(1, 0, "field %d of the header: unknown column %s%s; valid columns: %s", k+1, quote(h), hint,
				strings.Join(traceColumns, ", "))
		}
		col[h] = k
	}
	if _, health := col["node"]; !health {
		var missing []string
		for _, c := range jobColumns {
			if _, ok := col[c]; !ok {
				missing = append(missing, c)
			}
		}
		if len(missing) > 0 {
			what := "column"
			if len(missing) > 1 {
				what = "columns"
			}
			return nil, traceErr(1, 0, "the header has no %s %s; every job row needs %s", strings.Join(missing, ", "), what,
				strings.Join(jobColumns, ", "))
		}
	}
	return col, nil
}

// fieldCountErr says how a row's fields differ from the header's columns.
func fieldCountErr(line int, rec, names []string) error {
	if len(rec) < len(names) {
		return traceErr(line, 0, "%d fields, but the header names %d columns: the row has no %s (write an empty field for a default)",
			len(rec), len(names), strings.Join(names[len(rec):], ", "))
	}
	return traceErr(line, 0, "%d fields, but the header names only %d columns (%s); a field that holds a comma is quoted",
		len(rec), len(names), strings.Join(names, ", "))
}

// csvErr gives encoding/csv's errors the line and column they name.
func csvErr(err error) error {
	var te *TraceError
	if errors.As(err, &te) {
		return te
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return traceErr(pe.Line, pe.Column, "%v", pe.Err)
	}
	return &TraceError{Err: err}
}

// sniff refuses a file that is not text: a gzip file without its .gz name,
// or any binary data, quoting a few of its bytes rather than echoing them.
func sniff(br *bufio.Reader, format string) error {
	head, _ := br.Peek(512)
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		return traceErr(1, 1, "the file is gzip-compressed, not %s; name it with .gz after the format (trace.csv.gz)", format)
	}
	for i := 0; i < len(head); {
		r, size := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && size == 1 && len(head)-i >= utf8.UTFMax || r == 0 ||
			r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
			line := 1 + bytes.Count(head[:i], []byte("\n"))
			return traceErr(line, i-bytes.LastIndexByte(head[:i], '\n'), "binary data (%s), not a %s trace", quote(string(head[i:min(i+8, len(head))])), format)
		}
		i += size
	}
	return nil
}

// rowChecker adds rows to a trace, refusing a job ID seen before and
// skipping (counted) or returning invalid rows.
type rowChecker struct {
	opt  ReadOptions
	seen map[string]int // job ID to its line
}

func newRowChecker(opt ReadOptions) *rowChecker { return &rowChecker{opt: opt, seen: map[string]int{}} }

func (rc *rowChecker) skip(tr *Trace, err error) error {
	if !rc.opt.SkipInvalid {
		return err
	}
	tr.Skipped++
	return nil
}

func (rc *rowChecker) add(tr *Trace, line int, get func(string) string) error {
	jobs := len(tr.Jobs)
	if err := tr.addRow(line, get); err != nil {
		return rc.skip(tr, traceErr(line, 0, "%v", err))
	}
	if len(tr.Jobs) == jobs {
		return nil
	}
	id := tr.Jobs[jobs].ID
	if first, dup := rc.seen[id]; dup {
		tr.Jobs = tr.Jobs[:jobs]
		return rc.skip(tr, traceErr(line, 0, "job %s is also the job of line %d; give every job its own id", quote(id), first))
	}
	rc.seen[id] = line
	return nil
}

// finish sorts the trace, refusing one without a job.
func (rc *rowChecker) finish(tr *Trace) (*Trace, error) {
	if len(tr.Jobs) == 0 {
		what := "no rows"
		switch {
		case tr.Skipped > 0:
			what = fmt.Sprintf("no valid job rows (%d invalid rows skipped)", tr.Skipped)
		case len(tr.Health) > 0:
			what = fmt.Sprintf("no jobs, only %d health rows", len(tr.Health))
		}
		return nil, &TraceError{Err: fmt.Errorf("the trace has %s; give at least one job row", what)}
	}
	tr.sort()
	return tr, nil
}

// ReadJSONL reads a trace with one JSON object per line, keyed by the CSV
// column names ("at" is accepted for a health event's time). Blank lines are
// skipped; a key that is not a column is an error, as in CSV.
func ReadJSONL(r io.Reader, opt ReadOptions) (*Trace, error) {
	br := bufio.NewReader(r)
	if err := sniff(br, "JSON lines"); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 64*1024), jsonlMaxLine)
	tr := &Trace{}
	rows := newRowChecker(opt)
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		get, err := jsonlRowOf(line, b)
		if err != nil {
			if err = rows.skip(tr, err); err != nil {
				return nil, err
			}
			continue
		}
		if err := rows.add(tr, line, get); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, traceErr(line+1, 0, "longer than %d bytes; a JSON lines trace holds one job or health event per line", jsonlMaxLine)
		}
		return nil, &TraceError{Err: err}
	}
	return rows.finish(tr)
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
			return 0, fmt.Errorf("%s %s is out of range; give 0 to 10^10 seconds", name, quote(s))
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %s is not a duration; give a Go duration such as \"90m\" or seconds", name, quote(s))
	}
	return d, nil
}

func parseInt(name, s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s %s is not an integer", name, quote(s))
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
	return false, fmt.Errorf("%s %s: want true or false", name, quote(s))
}

// addRow parses one row, a job or a health event.
func (tr *Trace) addRow(line int, get func(string) string) error {
	if node := get("node"); node != "" {
		if given := givenOf(get, traceColumns, append([]string{"submit"}, healthColumns...)); len(given) > 0 {
			return fmt.Errorf("a health row (node %s) also gives %s; a row is either a job or a health event", quote(node),
				strings.Join(given, ", "))
		}
		return tr.addHealth(line, node, get)
	}
	if given := givenOf(get, healthColumns, nil); len(given) > 0 {
		return fmt.Errorf("a job row gives %s but no node; those columns belong to a health row", strings.Join(given, ", "))
	}
	j := JobSpec{Line: line}
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
	if get("gpus") == "" {
		return fmt.Errorf("job %s: gpus is missing; give the GPUs of each allocation, 1 to 64", quote(j.ID))
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
	j.Pool, j.Model = get("pool"), get("model")
	if sig := get("checkpoint_signal"); sig != "" {
		var ok bool
		if j.Signal, ok = contract.ParseSignal(sig); !ok {
			return fmt.Errorf("job %s: checkpoint_signal %s: want one of %s", quote(j.ID), quote(sig), strings.Join(contract.Signals, ", "))
		}
	}
	if n := get("checkpoint_notice"); n != "" {
		if j.Notice, err = parseDur("checkpoint_notice", n); err != nil {
			return err
		}
	}
	if kt := get("kill_timeout"); kt != "" {
		if j.KillTimeout, err = parseDur("kill_timeout", kt); err != nil {
			return err
		}
	}
	if err := j.Validate(); err != nil {
		return err
	}
	tr.Jobs = append(tr.Jobs, j)
	return nil
}

// givenOf lists the columns of names, other than those in except, that
// the row gives a value.
func givenOf(get func(string) string, names, except []string) []string {
	var given []string
	for _, c := range names {
		if !slices.Contains(except, c) && get(c) != "" {
			given = append(given, c)
		}
	}
	return given
}

func (tr *Trace) addHealth(line int, node string, get func(string) string) error {
	h := HealthEvent{Node: node, Reason: get("reason"), GPU: -1, Line: line}
	var err error
	if h.At, err = parseDur("submit (the event's time)", get("submit")); err != nil {
		return err
	}
	switch strings.ToLower(get("health")) {
	case "healthy":
		h.Healthy = true
	case "unhealthy":
	default:
		return fmt.Errorf("node %s: health %s: want healthy or unhealthy", quote(node), quote(get("health")))
	}
	if h.GPU, err = parseInt("gpu", get("gpu"), -1); err != nil {
		return err
	}
	if h.GPU < -1 || h.GPU > 63 {
		return fmt.Errorf("node %s: gpu %d: want an instance index 0-63, or -1 (or empty) for the whole node", quote(node), h.GPU)
	}
	tr.Health = append(tr.Health, h)
	return nil
}

func fmtDur(d time.Duration) string { return strconv.FormatInt(int64(d/time.Second), 10) }

// fmtNotice is a notice or a kill_timeout in seconds, "" for none.
func fmtNotice(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmtDur(d)
}

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
			strconv.Itoa(j.Priority), j.Baseline.String(), j.Pool, j.Model, j.Signal, fmtNotice(j.Notice), fmtNotice(j.KillTimeout), "", "", "", "")
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	for _, h := range tr.Health {
		health := "unhealthy"
		if h.Healthy {
			health = "healthy"
		}
		row = append(row[:0], fmtDur(h.At), "", "", "", "", "", "", "", "", "", "", "", "", "", "", "", h.Node, health,
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
		Pool       string `json:"pool,omitempty"`
		Model      string `json:"model,omitempty"`
		Signal     string `json:"checkpoint_signal,omitempty"`
		Notice     int64  `json:"checkpoint_notice,omitempty"`
		Kill       int64  `json:"kill_timeout,omitempty"`
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
			j.Baseline.String(), j.Pool, j.Model, j.Signal, int64(j.Notice / time.Second), int64(j.KillTimeout / time.Second)}); err != nil {
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
