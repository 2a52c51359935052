//go:build !race

package ui_test

const raceEnabled = false
