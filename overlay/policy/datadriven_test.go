package policy

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A tiny data-driven test runner after etcd-io/raft's testdata files. A file
// is a sequence of cases:
//
//	# comments and blank lines between cases are kept
//	command arg key=value "quoted arg"
//	optional input lines
//	----
//	expected output lines
//	(a blank line ends the case)
//
// Run with -rewrite to replace every expected output with the actual one.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of data-driven tests")

type ddCase struct {
	line   int // of the command
	cmd    string
	args   []string
	input  []string
	expect string
}

type ddChunk struct {
	text string  // verbatim text (comments, blank lines), or
	c    *ddCase // a case
}

func parseDD(t *testing.T, path string) []ddChunk {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var chunks []ddChunk
	for i := 0; i < len(lines); {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			chunks = append(chunks, ddChunk{text: l})
			i++
			continue
		}
		words, err := splitArgs(l)
		if err != nil {
			t.Fatalf("%s:%d: %v", path, i+1, err)
		}
		c := &ddCase{line: i + 1, cmd: words[0], args: words[1:]}
		i++
		for ; i < len(lines) && lines[i] != "----"; i++ {
			c.input = append(c.input, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: %q has no ---- line", path, c.line, l)
		}
		i++
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		if i < len(lines) {
			i++ // the blank line that ends the case
		}
		c.expect = strings.Join(out, "\n")
		chunks = append(chunks, ddChunk{c: c})
	}
	return chunks
}

// runDD runs every case of the file through do and compares (or rewrites).
func runDD(t *testing.T, path string, do func(c *ddCase) string) {
	chunks := parseDD(t, path)
	var b strings.Builder
	for _, ch := range chunks {
		if ch.c == nil {
			b.WriteString(ch.text + "\n")
			continue
		}
		c := ch.c
		got := strings.TrimRight(do(c), "\n")
		if !*rewrite && got != c.expect {
			t.Errorf("%s:%d: %s %s\n--- want\n%s\n--- got\n%s", path, c.line, c.cmd, strings.Join(c.args, " "), c.expect, got)
		}
		b.WriteString(c.cmd)
		for _, a := range c.args {
			if strings.ContainsAny(a, " \t") {
				a = fmt.Sprintf("%q", a)
			}
			b.WriteString(" " + a)
		}
		b.WriteString("\n")
		for _, in := range c.input {
			b.WriteString(in + "\n")
		}
		b.WriteString("----\n")
		if got != "" {
			b.WriteString(got + "\n")
		}
		b.WriteString("\n")
	}
	if *rewrite {
		out := strings.TrimRight(b.String(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// splitArgs splits a command line on spaces, keeping "quoted strings" (which
// may follow key=) together.
func splitArgs(l string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range l {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case (r == ' ' || r == '\t') && !inQuote:
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", l)
	}
	if have {
		words = append(words, cur.String())
	}
	return words, nil
}
