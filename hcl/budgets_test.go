package hcl

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/allot-sched/allot/budgets"
)

// published is the budget tree of the published diagram, nested in one file.
const published = `budget "ai2" {
  description = "Institute GPU time"
  owners      = ["program-office"]
  budget "prior" {
    share = 50
    budget "olmo" { share = 70 }
    budget "vision" { share = 30 }
  }
  budget "robotics" { share = 50 }
}
`

func mustLoad(t *testing.T, files map[string]string) *budgets.Tree {
	t.Helper()
	tr, err := LoadFiles(bytesMap(files))
	if err != nil {
		t.Fatalf("LoadFiles: %v", err)
	}
	return tr
}

func bytesMap(files map[string]string) map[string][]byte {
	m := make(map[string][]byte, len(files))
	for k, v := range files {
		m[k] = []byte(v)
	}
	return m
}

func checkEffective(t *testing.T, tr *budgets.Tree, want map[string]float64) {
	t.Helper()
	if tr.Len() != len(want) {
		t.Errorf("tree has %d nodes, want %d", tr.Len(), len(want))
	}
	for p, w := range want {
		n, ok := tr.Lookup(p)
		if !ok {
			t.Errorf("missing %s", p)
			continue
		}
		if math.Abs(n.Effective-w) > 1e-12 {
			t.Errorf("%s effective = %v, want %v", p, n.Effective, w)
		}
	}
}

var publishedEffective = map[string]float64{
	"ai2": 1, "ai2/prior": 0.5, "ai2/prior/olmo": 0.35, "ai2/prior/vision": 0.15, "ai2/robotics": 0.5,
}

func TestLoadNested(t *testing.T) {
	tr := mustLoad(t, map[string]string{"main.hcl": published})
	checkEffective(t, tr, publishedEffective)
	root := tr.Root()
	if root.Description != "Institute GPU time" || len(root.Owners) != 1 || root.Owners[0] != "program-office" {
		t.Errorf("root description/owners = %q %q", root.Description, root.Owners)
	}
	if root.Pos != "main.hcl:1:1" {
		t.Errorf("root pos = %q", root.Pos)
	}
	if n, _ := tr.Lookup("ai2/prior/olmo"); n.Pos != "main.hcl:6:5" || n.Share != 70 {
		t.Errorf("olmo pos %q share %v", n.Pos, n.Share)
	}
}

func TestLoadSplitAcrossFiles(t *testing.T) {
	tr := mustLoad(t, map[string]string{
		"root.hcl":  "budget \"ai2\" {\n  budget \"robotics\" { share = 50 }\n}\n",
		"prior.hcl": "budget \"ai2/prior\" {\n  share = 50\n  budget \"vision\" { share = 30 }\n}\n",
		// A subtree attached below another attached subtree, from its own file.
		"olmo.hcl": "budget \"ai2/prior/olmo\" {\n  share = 70\n  owners = [\"olmo-leads\"]\n}\n",
	})
	checkEffective(t, tr, publishedEffective)
	n, _ := tr.Lookup("ai2/prior/olmo")
	if n.Pos != "olmo.hcl:1:1" || len(n.Owners) != 1 || n.Owners[0] != "olmo-leads" {
		t.Errorf("olmo pos %q owners %q", n.Pos, n.Owners)
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("main.hcl", published)
	write("notes.txt", "not a budget file {")                              // ignored: not *.hcl
	write("extra.hcl.bak", `budget "other" {}`)                            // ignored
	if err := os.Mkdir(filepath.Join(dir, "sub.hcl"), 0o755); err != nil { // ignored: a directory
		t.Fatal(err)
	}
	write(filepath.Join("sub.hcl", "x.hcl"), `budget "second-root" {}`)
	tr, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkEffective(t, tr, publishedEffective)
	if want := filepath.Join(dir, "main.hcl") + ":1:1"; tr.Root().Pos != want {
		t.Errorf("root pos %q, want %q", tr.Root().Pos, want)
	}
}

func TestLoadDirErrors(t *testing.T) {
	empty := t.TempDir()
	_, err := LoadDir(empty)
	var ds Diagnostics
	if !errors.As(err, &ds) || len(ds) != 1 || ds[0].File != empty || ds[0].Line != 0 ||
		!strings.Contains(ds[0].Message, "no *.hcl files") {
		t.Errorf("empty dir: %v", err)
	}
	if got := ds.Error(); got != empty+": "+ds[0].Message {
		t.Errorf("Error() = %q", got)
	}
	_, err = LoadDir(filepath.Join(empty, "missing"))
	if err == nil || errors.As(err, &ds) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
	if _, err := LoadFiles(nil); !errors.As(err, &ds) || !strings.Contains(ds[0].Message, "no budget files") {
		t.Errorf("no files: %v", err)
	}
}

// want is one expected diagnostic: exact position, and substrings of the message.
type want struct {
	pos  string
	msgs []string
}

// validationCases has one case per validation rule: the files of one load,
// and every diagnostic expected from it, in order.
var validationCases = []struct {
	name  string
	files map[string]string
	want  []want
}{
	{"unknown attribute with suggestion",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" {\n    shares = 5\n  }\n}\n"},
		[]want{
			{"a.hcl:2:3", []string{`budget "ai2/x" has no share`, "add share = N"}},
			{"a.hcl:3:5", []string{`unknown attribute "shares"`, `did you mean "share"?`, "valid attributes are share, description and owners"}},
		}},
	{"unknown block",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  team \"x\" {}\n}\n"},
		[]want{{"a.hcl:2:3", []string{`budget "ai2": unknown block "team"`, "only nested budget blocks are valid here"}}}},
	{"unknown top-level attribute and block",
		map[string]string{"a.hcl": "version = 2\nbudget \"ai2\" {}\nbudgets \"x\" {}\n"},
		[]want{
			{"a.hcl:1:1", []string{`attribute "version" is not valid at the top level`, "only budget blocks"}},
			{"a.hcl:3:1", []string{`block "budgets" is not valid at the top level`}},
		}},
	{"missing share",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" {\n    description = \"no share\"\n  }\n}\n"},
		[]want{{"a.hcl:2:3", []string{`budget "ai2/x" has no share`, "positive number"}}}},
	{"zero share",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = 0 }\n}\n"},
		[]want{{"a.hcl:2:24", []string{`budget "ai2/x": share must be a positive finite number`, "got 0"}}}},
	{"negative share",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = -5 }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"share must be a positive finite number", "got -5"}}}},
	{"infinite share",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = 1/0 }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"share must be a positive finite number", "got +Inf"}}}},
	{"share beyond float64",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = 1e400 }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"share must be a positive finite number", "got 1e+400"}}}},
	{"share of the wrong type",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = \"50\" }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"share must be a positive finite number", "got string"}}}},
	{"null share",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = null }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"share must be a positive finite number", "got null"}}}},
	{"share from a variable",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = var.s }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"Variables not allowed"}}}},
	{"description and owners of the wrong type",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  description = [\"x\"]\n  owners = \"me\"\n}\n"},
		[]want{
			{"a.hcl:2:17", []string{`budget "ai2": description must be a string, got tuple`}},
			{"a.hcl:3:12", []string{"owners must be a list of non-empty strings", "got string"}},
		}},
	{"bad owner element",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  owners = [\"a\", 5, \"\"]\n}\n"},
		[]want{
			{"a.hcl:2:18", []string{"owners[1] must be a non-empty string, got number"}},
			{"a.hcl:2:21", []string{"owners[2] must be a non-empty string, got an empty string"}},
		}},
	{"share on the root",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  share = 100\n}\n"},
		[]want{{"a.hcl:2:3", []string{`the root budget "ai2" takes no share`, "remove share"}}}},
	{"bad name nested",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"Prior Lab\" {\n    share = 1\n    budget \"olmo\" { share = 1 }\n  }\n}\n"},
		[]want{{"a.hcl:2:10", []string{`budget name "Prior Lab" in "ai2/Prior Lab" is not valid`, "a-z, 0-9, '_' and '-'", `(e.g. "prior-lab")`}}}},
	{"bad name in a path segment",
		map[string]string{
			"a.hcl": "budget \"ai2\" {}\n",
			"b.hcl": "budget \"ai2/pri.or/olmo\" { share = 1 }\n",
		},
		[]want{{"b.hcl:1:8", []string{`budget name "pri.or" in "ai2/pri.or/olmo" is not valid`}}}},
	{"empty path segment",
		map[string]string{"a.hcl": "budget \"ai2\" {}\nbudget \"ai2//x\" { share = 1 }\n"},
		[]want{{"a.hcl:2:8", []string{`budget name "" in "ai2//x" is not valid`}}}},
	{"slash in a nested label",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"prior/olmo\" { share = 1 }\n}\n"},
		[]want{{"a.hcl:2:10", []string{`nested budget label "prior/olmo" contains '/'`, `(budget "olmo")`}}}},
	{"wrong number of labels",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget { share = 1 }\n  budget \"a\" \"b\" { share = 1 }\n}\n"},
		[]want{
			{"a.hcl:2:3", []string{"takes exactly one label", "got 0"}},
			{"a.hcl:3:3", []string{"takes exactly one label", "got 2"}},
		}},
	{"duplicate in one file",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = 1 }\n  budget \"x\" { share = 2 }\n}\n"},
		[]want{{"a.hcl:3:10", []string{`budget "ai2/x" is declared twice (first at a.hcl:2:3)`}}}},
	{"duplicate across files",
		map[string]string{
			"a.hcl": "budget \"ai2\" {\n  budget \"prior\" {\n    share = 1\n    budget \"olmo\" { share = 1 }\n  }\n}\n",
			"b.hcl": "\nbudget \"ai2/prior/olmo\" { share = 2 }\n",
		},
		[]want{{"b.hcl:2:8", []string{`budget "ai2/prior/olmo" is declared twice (first at a.hcl:4:5)`, "declare each path once"}}}},
	{"subtree attached to an undeclared path",
		map[string]string{
			"a.hcl": "budget \"ai2\" {\n  budget \"prior\" { share = 1 }\n}\n",
			"b.hcl": "budget \"ai2/prior/nlp/olmo\" { share = 2 }\n",
		},
		[]want{{"b.hcl:1:8", []string{`budget "ai2/prior/nlp/olmo" is attached to "ai2/prior/nlp", which no file declares`,
			`nearest declared budget is "ai2/prior" (a.hcl:2:3)`}}}},
	{"subtree attached to a misspelt path",
		map[string]string{
			"a.hcl": "budget \"ai2\" {\n  budget \"vision\" { share = 1 }\n  budget \"robotics\" { share = 1 }\n}\n",
			"b.hcl": "budget \"ai2/vison/interns\" { share = 2 }\n",
		},
		[]want{{"b.hcl:1:8", []string{`attached to "ai2/vison", which no file declares`, `nearest declared budget is "ai2" (a.hcl:1:1)`,
			`(did you mean "ai2/vision"?)`}}}},
	{"subtree under another root name",
		map[string]string{
			"a.hcl": "budget \"ai2\" {}\n",
			"b.hcl": "budget \"inst/prior\" { share = 2 }\n",
		},
		[]want{{"b.hcl:1:8", []string{`attached to "inst", which no file declares`, `paths start at the root "ai2"`}}}},
	{"more than one root",
		map[string]string{
			"a.hcl": "budget \"ai2\" {}\n",
			"b.hcl": "budget \"robotics\" {}\nbudget \"vision\" {}\n",
		},
		[]want{
			{"b.hcl:1:8", []string{`budget "robotics" is a second root (the root is "ai2", declared at a.hcl:1:1)`, `budget "ai2/robotics"`}},
			{"b.hcl:2:8", []string{`budget "vision" is a second root`}},
		}},
	{"no root",
		map[string]string{"a.hcl": "# nothing here yet\n", "b.hcl": ""},
		[]want{{"a.hcl", []string{"no root budget in any file"}}}},
	{"syntax error",
		map[string]string{"a.hcl": "budget \"ai2\" {\n  budget \"x\" { share = }\n}\n"},
		[]want{{"a.hcl:2:24", []string{"Invalid expression"}}}},
	{"syntax error hides cross-file checks but not other files' problems",
		map[string]string{
			"a.hcl": "budget \"ai2\" {\n  budget \"prior\" {\n",
			"b.hcl": "budget \"ai2/prior/olmo\" { shar = 2 }\n",
		},
		[]want{
			{"a.hcl:2:18", []string{"Unclosed configuration block"}},
			{"b.hcl:1:1", []string{`budget "ai2/prior/olmo" has no share`}},
			{"b.hcl:1:27", []string{`unknown attribute "shar"`, `did you mean "share"?`}},
		}},
}

func TestValidation(t *testing.T) {
	for _, c := range validationCases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := LoadFiles(bytesMap(c.files))
			if err == nil {
				t.Fatalf("no error; tree of %d nodes", tr.Len())
			}
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("error is %T, not Diagnostics: %v", err, err)
			}
			if len(ds) != len(c.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(ds), len(c.want), err)
			}
			lines := strings.Split(err.Error(), "\n")
			for i, w := range c.want {
				if ds[i].Pos() != w.pos {
					t.Errorf("diagnostic %d at %s, want %s: %s", i, ds[i].Pos(), w.pos, ds[i].Message)
				}
				for _, m := range w.msgs {
					if !strings.Contains(ds[i].Message, m) {
						t.Errorf("diagnostic %d %q lacks %q", i, ds[i].Message, m)
					}
				}
				if lines[i] != w.pos+": "+ds[i].Message {
					t.Errorf("Error() line %d = %q", i, lines[i])
				}
			}
		})
	}
}

// TestAllErrorsSorted checks that problems of several files all come back,
// ordered by file and then position regardless of the order they were found in.
func TestAllErrorsSorted(t *testing.T) {
	_, err := LoadFiles(bytesMap(map[string]string{
		"z.hcl": "budget \"ai2/b\" { share = -1 }\n",
		"a.hcl": "budget \"ai2\" {\n  budget \"Q\" { share = 1 }\n  colour = \"red\"\n  budget \"p\" { share = 0 }\n}\n",
		"m.hcl": "budget \"ai2/b\" { share = 1 }\n",
	}))
	var ds Diagnostics
	if !errors.As(err, &ds) {
		t.Fatalf("%v", err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.Pos())
	}
	want := "a.hcl:2:10 a.hcl:3:3 a.hcl:4:24 z.hcl:1:8 z.hcl:1:26"
	if strings.Join(got, " ") != want {
		t.Errorf("positions %s, want %s\n%v", strings.Join(got, " "), want, err)
	}
}
