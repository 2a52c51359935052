package hcl

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzLoadFiles loads two arbitrary files as one tree. It must never panic,
// and must return either a consistent tree or positioned diagnostics, the
// same ones each time. Seeds live in testdata/fuzz/FuzzLoadFiles.
func FuzzLoadFiles(f *testing.F) {
	f.Add([]byte(published), []byte(""))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		files := map[string][]byte{"a.hcl": a, "b.hcl": b}
		tr, err := LoadFiles(files)
		if err != nil {
			var ds Diagnostics
			if !errors.As(err, &ds) || len(ds) == 0 {
				t.Fatalf("error is not Diagnostics: %T %v", err, err)
			}
			for i, d := range ds {
				if d.File != "a.hcl" && d.File != "b.hcl" {
					t.Errorf("diagnostic without a file: %q", d.String())
				}
				if d.Line < 1 && !strings.Contains(d.Message, "no root budget") {
					t.Errorf("diagnostic without a position: %q", d.String())
				}
				if d.Message == "" || strings.Contains(d.Message, "\n") {
					t.Errorf("diagnostic message must be one non-empty line: %q", d.Message)
				}
				if i > 0 && (ds[i-1].File > d.File || ds[i-1].File == d.File && ds[i-1].Line > d.Line) {
					t.Errorf("diagnostics not sorted: %q before %q", ds[i-1].String(), d.String())
				}
			}
			if _, err2 := LoadFiles(files); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("second load differs:\n%v\n---\n%v", err, err2)
			}
			return
		}
		var sum float64
		for _, l := range tr.Leaves() {
			sum += l.Effective
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("leaves' effective shares sum to %v", sum)
		}
		for _, n := range tr.Nodes() {
			if !strings.HasPrefix(n.Pos, "a.hcl:") && !strings.HasPrefix(n.Pos, "b.hcl:") {
				t.Errorf("node %s has pos %q", n.Path, n.Pos)
			}
		}
	})
}
