package budgets

import "strings"

// nearestMaxEdits is how far a misspelling may be from what it meant and
// still be suggested: two edits catch a dropped, doubled or swapped letter
// ("vison", "vidoe") without suggesting unrelated names. A short name takes
// at most half its length in edits, or "frob" would suggest "job".
const nearestMaxEdits = 2

// Nearest returns the string of valid closest to got within two edits
// (Levenshtein distance, in bytes) and half its own length, "" when none is
// that close. Of equally
// close ones the first in valid wins, so callers pass a sorted list for a
// stable answer. It is the one did-you-mean of allot: budget files,
// job meta and the CLI's command names all use it.
func Nearest(got string, valid []string) string {
	best, bestD := "", nearestMaxEdits+1
	for _, v := range valid {
		if d := editDistance(got, v); d < bestD && d <= len(v)/2 {
			best, bestD = v, d
		}
	}
	return best
}

// NearestLeaf returns the path of the leaf closest in spelling to path
// within two edits, "" when none is that close: the did-you-mean for a job
// that names a budget the tree does not have.
func (t *Tree) NearestLeaf(path string) string {
	paths := make([]string, len(t.leaves))
	for i, l := range t.leaves {
		paths[i] = l.Path
	}
	return Nearest(path, paths)
}

// LeavesUnder returns the paths of the leaves below path, in path order
// (nil when path is a leaf or not in the tree): what a job naming an inner
// budget may name instead.
func (t *Tree) LeavesUnder(path string) []string {
	n, ok := t.byPath[path]
	if !ok || n.IsLeaf() {
		return nil
	}
	var out []string
	for _, l := range t.leaves {
		if strings.HasPrefix(l.Path, path+Separator) {
			out = append(out, l.Path)
		}
	}
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
