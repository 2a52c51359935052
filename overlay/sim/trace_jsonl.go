package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
)

// jsonlMaxLine bounds one line of a JSON lines trace (a row is a few hundred
// bytes; a longer line is not a trace).
const jsonlMaxLine = 1 << 20

// jsonlObject reads one line of a JSON lines trace: an object whose keys are
// trace columns ("at" for "submit") and whose values are strings, numbers,
// booleans or null (null: as if absent). Values come back as the text a CSV
// field would hold. Errors name the line and the column of the byte at fault.
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
		name := key
		if name == "at" {
			name = "submit"
		}
		if !slices.Contains(traceColumns, name) {
			return nil, traceErr(line, at, "unknown key %s; valid keys: %s, and \"at\" for \"submit\"", quote(key),
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
