package client

import (
	"encoding/json"
	"fmt"
	"math"
)

// Ratio is a float64 of the API that may be infinite or NaN (a sort
// metric or a ratio over zero usage). Its JSON never fails: a finite value
// is a JSON number, +Inf the string "inf", -Inf "-inf" and NaN null, the
// same form as budgets.Ratio on the server side. encoding/json refuses
// infinities and NaN in a float64, which would fail the whole answer.
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
