package sim

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// ErrInvalidTrace is wrapped by every error about a trace's content.
var ErrInvalidTrace = errors.New("invalid trace")

// TraceError is a problem at a place in a trace file: Line is 1-based
// (0 for a trace not read from a file, such as a generated one), Column is
// 1-based and 0 when the problem concerns the whole row. Callers that know
// the file's name print it as name:line:col: (see Pos).
type TraceError struct {
	Line, Column int
	Err          error
}

func (e *TraceError) Error() string {
	switch {
	case e.Line == 0:
		return e.Err.Error()
	case e.Column == 0:
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

// Unwrap returns the problem itself.
func (e *TraceError) Unwrap() error { return e.Err }

// Is makes every TraceError an ErrInvalidTrace.
func (e *TraceError) Is(target error) bool { return target == ErrInvalidTrace }

// Pos is the place as a compiler prints it after a file name: ":7:12", ":7"
// without a column, "" without a line.
func (e *TraceError) Pos() string {
	switch {
	case e.Line == 0:
		return ""
	case e.Column == 0:
		return ":" + strconv.Itoa(e.Line)
	}
	return ":" + strconv.Itoa(e.Line) + ":" + strconv.Itoa(e.Column)
}

// Msg is the problem without its place.
func (e *TraceError) Msg() string { return e.Err.Error() }

func traceErr(line, col int, format string, args ...any) *TraceError {
	return &TraceError{Line: line, Column: col, Err: fmt.Errorf(format, args...)}
}

// quoteMax is how many bytes of a value a message quotes: enough to
// recognise a misspelt name, short enough that a binary file's first line
// does not fill the terminal.
const quoteMax = 40

// quote is s quoted and escaped as Go does (%q), cut to quoteMax bytes
// (on a rune boundary) with "..." after the closing quote when cut.
func quote(s string) string {
	if len(s) <= quoteMax {
		return strconv.Quote(s)
	}
	cut := quoteMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + fmt.Sprintf("... (%d bytes)", len(s))
}
