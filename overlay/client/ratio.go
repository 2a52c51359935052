package client

import "github.com/allot-sched/allot/budgets"

// Ratio is a float64 of the API that may be infinite or NaN (a sort metric
// or a ratio over zero usage). It is budgets.Ratio itself, so the client
// reads exactly the JSON the server writes: a finite value is a JSON number,
// +Inf the string "inf", -Inf "-inf" and NaN null. encoding/json refuses
// infinities and NaN in a float64, which would fail the whole answer.
type Ratio = budgets.Ratio
