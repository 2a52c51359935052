package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// A write without a token, or with the wrong one, says once how to pass it.
func TestTokenHintOnce(t *testing.T) {
	t.Setenv("ALLOT_ADDR", devAPI(t))
	t.Setenv("ALLOT_TOKEN", "")
	examples := filepath.Join("..", "..", "examples", "budgets")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"budgets", "apply", examples}, "Error: server answered 401 Unauthorized: a token is required for applying budgets " +
			"(the budgets capability; header Authorization: Bearer TOKEN, or X-Allot-Token); pass the server's token with -token or ALLOT_TOKEN\n"},
		{[]string{"nodes", "return", "n1"}, "Error: server answered 401 Unauthorized: a token is required for operator actions: raft join, " +
			"remove-peer and node return (the operator capability; header Authorization: Bearer TOKEN, or X-Allot-Token); " +
			"pass the server's token with -token or ALLOT_TOKEN\n"},
		{[]string{"budgets", "apply", "-token", "wrong", examples}, "Error: server answered 403 Forbidden: token refused: " +
			"it does not grant the budgets capability (applying budgets needs the server's budgets token); " +
			"pass the server's token with -token or ALLOT_TOKEN\n"},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != exitInvalid || errOut != tc.want || strings.Count(errOut, "-token") != 1 {
			t.Errorf("%v: %d\n got %q\nwant %q", tc.args, code, errOut, tc.want)
		}
	}
}
