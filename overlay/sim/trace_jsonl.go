package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/allot-sched/allot/budgets"
)

// jsonlMaxLine bounds one line of a JSON lines trace (a row is a few hundred
// bytes; a longer line is not a trace).
const jsonlMaxLine = 1 << 20

// jsonlValue is one value of a JSON lines row, as the text a CSV field
// would hold. Its UnmarshalJSON refuses what the row cannot hold (an array,
// an object, a key given twice), so that jsonlObject's slow path says where.
type jsonlValue struct {
	set bool
	v   string
}

var errJSONLRow = errors.New("not a plain row")

func (f *jsonlValue) UnmarshalJSON(b []byte) error {
	if f.set {
		return errJSONLRow
	}
	f.set = true
	switch b[0] {
	case '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		f.v = strings.TrimSpace(s)
	case 'n': // null: as if absent
	case '[', '{':
		return errJSONLRow
	default: // a number, true or false: its text
		f.v = string(b)
	}
	return nil
}

// jsonlRow is a row decoded the fast way. encoding/json matches keys to
// fields without regard to case, as a CSV header is read.
type jsonlRow struct {
	Submit     jsonlValue `json:"submit"`
	At         jsonlValue `json:"at"`
	Job        jsonlValue `json:"job"`
	Budget     jsonlValue `json:"budget"`
	Class      jsonlValue `json:"class"`
	Count      jsonlValue `json:"count"`
	GPUs       jsonlValue `json:"gpus"`
	Work       jsonlValue `json:"work"`
	MinRuntime jsonlValue `json:"min_runtime"`
	Resumable  jsonlValue `json:"resumable"`
	Priority   jsonlValue `json:"priority"`
	Baseline   jsonlValue `json:"baseline"`
	Pool       jsonlValue `json:"pool"`
	Model      jsonlValue `json:"model"`
	Signal     jsonlValue `json:"checkpoint_signal"`
	Notice     jsonlValue `json:"checkpoint_notice"`
	Kill       jsonlValue `json:"kill_timeout"`
	Node       jsonlValue `json:"node"`
	Health     jsonlValue `json:"health"`
	GPU        jsonlValue `json:"gpu"`
	Reason     jsonlValue `json:"reason"`
}

func (r *jsonlRow) get(name string) string {
	switch name {
	case "submit":
		if r.At.set {
			return r.At.v
		}
		return r.Submit.v
	case "job":
		return r.Job.v
	case "budget":
		return r.Budget.v
	case "class":
		return r.Class.v
	case "count":
		return r.Count.v
	case "gpus":
		return r.GPUs.v
	case "work":
		return r.Work.v
	case "min_runtime":
		return r.MinRuntime.v
	case "resumable":
		return r.Resumable.v
	case "priority":
		return r.Priority.v
	case "baseline":
		return r.Baseline.v
	case "pool":
		return r.Pool.v
	case "model":
		return r.Model.v
	case "checkpoint_signal":
		return r.Signal.v
	case "checkpoint_notice":
		return r.Notice.v
	case "kill_timeout":
		return r.Kill.v
	case "node":
		return r.Node.v
	case "health":
		return r.Health.v
	case "gpu":
		return r.GPU.v
	case "reason":
		return r.Reason.v
	}
	return ""
}

// jsonlRowOf reads one line of a JSON lines trace: an object whose keys are
// trace columns ("at" for "submit", any case) and whose values are strings,
// numbers, booleans or null (null: as if absent). Most lines decode in one
// pass of encoding/json; one it refuses is read again token by token
// (jsonlObject), to say what is wrong and at which column.
func jsonlRowOf(line int, b []byte) (func(string) string, error) {
	var r jsonlRow
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err == nil && !(r.At.set && r.Submit.set) && !dec.More() {
		return r.get, nil
	}
	obj, err := jsonlObject(line, b)
	if err != nil {
		return nil, err
	}
	// The slow path found nothing wrong the fast one refused: a key's case
	// is all that differs, or a value's JSON is unusual; use what it read.
	return func(name string) string { return obj[name] }, nil
}

// jsonlObject reads one line of a JSON lines trace token by token, as
// jsonlRowOf describes, naming the line and the column of the byte at fault.
func jsonlObject(line int, b []byte) (map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	// col is the 1-based column of the first byte after the decoder's
	// position that is not blank or a separator: where the next token starts.
	col := func() int {
		i := int(dec.InputOffset())
		for i < len(b) && strings.IndexByte(" \t\r\n,:", b[i]) >= 0 {
			i++
		}
		return i + 1
	}
	syntax := func(err error) error {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return traceErr(line, int(se.Offset)+1, "%v", se) // Offset counts the bytes before the one at fault
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return traceErr(line, len(b)+1, "the JSON object is not closed; a JSON lines trace holds one whole object per line")
		}
		return traceErr(line, col(), "%v", err)
	}
	start := col()
	tok, err := dec.Token()
	if err != nil {
		return nil, syntax(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, traceErr(line, start, "want a JSON object such as {\"submit\": 0, \"job\": \"a\", \"gpus\": 1, \"work\": \"1h\"}")
	}
	obj := map[string]string{}
	for dec.More() {
		at := col()
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key := tok.(string) // a JSON object's keys are strings, or Token fails
		name := strings.ToLower(key)
		if name == "at" {
			name = "submit"
		}
		if !slices.Contains(traceColumns, name) {
			hint := ""
			if near := budgets.Nearest(name, traceColumns); near != "" {
				hint = fmt.Sprintf(" (did you mean %q?)", near)
			}
			return nil, traceErr(line, at, "unknown key %s%s; valid keys: %s, and \"at\" for \"submit\"", quote(key), hint,
				strings.Join(traceColumns, ", "))
		}
		if _, dup := obj[name]; dup {
			return nil, traceErr(line, at, "key %s is given twice (\"at\" and \"submit\" are the same key); give it once", quote(key))
		}
		at = col()
		if tok, err = dec.Token(); err != nil {
			return nil, syntax(err)
		}
		switch v := tok.(type) {
		case json.Delim:
			return nil, traceErr(line, at, "key %s: want a string, number, boolean or null, not an %s", quote(key),
				map[json.Delim]string{'[': "array", '{': "object"}[v])
		case string:
			obj[name] = strings.TrimSpace(v)
		case json.Number:
			obj[name] = v.String()
		case bool:
			obj[name] = strconv.FormatBool(v)
		case nil:
			obj[name] = ""
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntax(err)
	}
	end := int(dec.InputOffset())
	if rest := bytes.TrimLeft(b[end:], " \t\r"); len(rest) > 0 {
		return nil, traceErr(line, len(b)-len(rest)+1, "more after the JSON object; a JSON lines trace holds one object per line")
	}
	return obj, nil
}
