package budgets

import (
	"encoding/json"
	"fmt"
	"math"
)

// Ratio is a float64 that may be infinite, such as a Level Fairshare S/U
// over zero usage, with a JSON form that never fails: a finite value is a
// JSON number (as encoding/json writes a float64), +Inf is the string "inf",
// -Inf is "-inf" and NaN is null. encoding/json refuses infinities and NaN,
// so a plain float64 holding one would fail the whole document.
type Ratio float64

// MarshalJSON writes r as described on Ratio.
func (r Ratio) MarshalJSON() ([]byte, error) {
	f := float64(r)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-inf"`), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads what MarshalJSON writes ("+inf" too).
func (r *Ratio) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "null":
		*r = Ratio(math.NaN())
		return nil
	case `"inf"`, `"+inf"`:
		*r = Ratio(math.Inf(1))
		return nil
	case `"-inf"`:
		*r = Ratio(math.Inf(-1))
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("ratio %s: want a number, \"inf\", \"-inf\" or null", b)
	}
	*r = Ratio(f)
	return nil
}

// levelPartJSON is LevelPart's JSON form.
type levelPartJSON struct {
	Path          string  `json:"path"`
	Share         float64 `json:"share"`
	UsageFraction float64 `json:"usage_fraction"`
	Level         Ratio   `json:"level"`
}

// MarshalJSON encodes the part; Level is a Ratio ("inf" when the node's
// siblings used nothing or it used nothing itself).
func (p LevelPart) MarshalJSON() ([]byte, error) {
	return json.Marshal(levelPartJSON{Path: p.Path, Share: p.Share, UsageFraction: p.UsageFraction, Level: Ratio(p.Level)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *LevelPart) UnmarshalJSON(b []byte) error {
	var j levelPartJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = LevelPart{Path: j.Path, Share: j.Share, UsageFraction: j.UsageFraction, Level: float64(j.Level)}
	return nil
}

// MarshalJSON encodes a leaf's standing with the leaf's path (not the tree
// node, whose parent links would recurse) and its served ratio.
func (r LeafRank) MarshalJSON() ([]byte, error) {
	path := ""
	if r.Leaf != nil {
		path = r.Leaf.Path
	}
	return json.Marshal(struct {
		Leaf        string      `json:"leaf"`
		Position    int         `json:"position"`
		Metric      Ratio       `json:"metric"`
		Parts       []LevelPart `json:"parts"`
		Usage       int64       `json:"usage_gpu_seconds"`
		UsageShare  Ratio       `json:"usage_share"`
		Effective   Ratio       `json:"effective"`
		ServedRatio Ratio       `json:"served_ratio"`
	}{path, r.Position, Ratio(r.Metric), r.Parts, r.Usage, Ratio(r.UsageShare), Ratio(r.Effective), Ratio(r.ServedRatio())})
}
