//go:build race

package ui_test

// raceEnabled: the race detector slows the server's ledger writes about
// tenfold, so a load-time figure taken under it means nothing.
const raceEnabled = true
