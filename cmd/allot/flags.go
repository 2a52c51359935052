package main

import "strings"

// isFlagError recognizes the flag package's parse errors, which urfave/cli
// returns unwrapped for unknown flags and bad values.
func isFlagError(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "flag provided but not defined") ||
		strings.Contains(s, "invalid value") ||
		strings.Contains(s, "flag needs an argument") ||
		strings.HasPrefix(s, "No help topic") ||
		strings.Contains(s, "Required flag")
}
