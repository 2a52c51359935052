package hcl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeBenchTree writes files budget files holding nodes budgets in total:
// a root file, and per program file a subtree attached by full path with
// teams nested in it, each team with a few projects (the shape a 100-team
// institute would have).
func writeBenchTree(b *testing.B, dir string, files, nodes int) {
	b.Helper()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write("root.hcl", "budget \"institute\" {\n  description = \"Institute GPU time\"\n  owners = [\"program-office\"]\n}\n")
	written := 1
	for f := 0; f < files-1; f++ {
		// Spread the nodes below the root evenly: 999 over 99 files is 10 or 11 each.
		perFile := (nodes - 1) / (files - 1)
		if f < (nodes-1)%(files-1) {
			perFile++
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "budget \"institute/program-%02d\" {\n  share = %d\n  owners = [\"lead-%02d\"]\n", f, 10+f%7, f)
		n := 1
		for team := 0; n < perFile; team++ {
			fmt.Fprintf(&sb, "  budget \"team-%d\" {\n    share = %d\n    description = \"team %d\"\n", team, 20+team*5, team)
			n++
			for p := 0; p < 2 && n < perFile; p++ {
				fmt.Fprintf(&sb, "    budget \"project-%d\" { share = %d }\n", p, 60-p*20)
				n++
			}
			sb.WriteString("  }\n")
		}
		sb.WriteString("}\n")
		write(fmt.Sprintf("program-%02d.hcl", f), sb.String())
		written += n
	}
	if written != nodes {
		b.Fatalf("wrote %d nodes, want %d", written, nodes)
	}
}

// BenchmarkLoadDir loads and validates 100 files holding 1,000 budgets,
// reading them from disk each time (target: ≤ 200 ms per load).
func BenchmarkLoadDir(b *testing.B) {
	dir := b.TempDir()
	writeBenchTree(b, dir, 100, 1000)
	b.ResetTimer()
	for b.Loop() {
		tr, err := LoadDir(dir)
		if err != nil {
			b.Fatal(err)
		}
		if tr.Len() != 1000 {
			b.Fatalf("tree has %d nodes", tr.Len())
		}
	}
	b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/load")
}
