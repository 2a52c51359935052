package contract

import (
	"strings"
	"time"
)

// Signals lists the signals checkpoint_signal may name: those a task can
// trap (SIGKILL and SIGSTOP cannot be caught) and that Nomad's allocation
// signal API delivers by name.
var Signals = []string{"SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGWINCH"}

// signalsList is Signals for warnings.
var signalsList = strings.Join(Signals, ", ")

// ParseSignal reads a signal name, case-insensitive, with or without the
// SIG prefix ("usr1", "SIGUSR1"), and returns it as Nomad names it
// ("SIGUSR1"); ok is false for a name not in Signals.
func ParseSignal(s string) (string, bool) {
	n := strings.ToUpper(strings.TrimSpace(s))
	if n != "" && !strings.HasPrefix(n, "SIG") {
		n = "SIG" + n
	}
	for _, v := range Signals {
		if n == v {
			return v, true
		}
	}
	return "", false
}

// parseNotice reads checkpoint_signal and checkpoint_notice. A usable
// notice needs both: a signal with no time to act on it, or a time with no
// signal to start it, is no notice (with a warning), so the job is stopped
// as before rather than signalled with a signal it may not trap. A notice
// above limit is clamped to it.
func parseNotice(meta map[string]string, limit time.Duration, warn warnFunc) (string, time.Duration) {
	rawSig, hasSig := meta[KeyCheckpointSignal]
	rawDur, hasDur := meta[KeyCheckpointNotice]
	if !hasSig && !hasDur {
		return "", 0
	}
	sig, sigOK := "", false
	if hasSig {
		if sig, sigOK = ParseSignal(rawSig); !sigOK {
			why := "not a signal a task can trap"
			if n := strings.ToUpper(strings.TrimSpace(rawSig)); n == "SIGKILL" || n == "KILL" || n == "SIGSTOP" || n == "STOP" {
				why = "cannot be trapped, so the job could not save anything"
			}
			warn(KeyCheckpointSignal, rawSig, "%s; the job gets no notice before a stop. Use one of %s", why, signalsList)
		}
	}
	var d time.Duration
	durOK := false
	if hasDur {
		s := strings.TrimSpace(rawDur)
		v, err := time.ParseDuration(s)
		switch {
		case s == "" || err != nil:
			warn(KeyCheckpointNotice, rawDur, "not a duration; the job gets no notice before a stop. Use a Go/Nomad duration such as \"2m\" (at most %s)", limit)
		case v <= 0:
			warn(KeyCheckpointNotice, rawDur, "not positive; the job gets no notice before a stop. Use a duration between 1s and %s, such as \"2m\"", limit)
		case v > limit:
			warn(KeyCheckpointNotice, rawDur, "above the cap of %s (policy { max_checkpoint_notice }); the job gets %s of notice", limit, limit)
			d, durOK = limit, true
		default:
			d, durOK = v, true
		}
	}
	switch {
	case hasSig && !hasDur && sigOK:
		warn(KeyCheckpointSignal, rawSig, "no checkpoint_notice says how long to wait after it; the job gets no notice before a stop. Add checkpoint_notice, e.g. \"2m\" (at most %s)", limit)
	case hasDur && !hasSig && durOK:
		warn(KeyCheckpointNotice, rawDur, "no checkpoint_signal says which signal to send; the job gets no notice before a stop. Add checkpoint_signal, one of %s", signalsList)
	}
	if !sigOK || !durOK {
		return "", 0
	}
	return sig, d
}

// parseClass reads meta class: "session" marks a restorable session, which
// needs a notice to save its state (else a warning, and an ordinary job).
// Other classes are left to the user (no warning): the key is shared.
func parseClass(meta map[string]string, notice bool, warn warnFunc) bool {
	raw, ok := meta[KeyClass]
	if !ok || !strings.EqualFold(strings.TrimSpace(raw), ClassSession) {
		return false
	}
	if !notice {
		warn(KeyClass, raw, "a session needs checkpoint_signal and checkpoint_notice to save its state before a stop; it runs as an ordinary job. Add both, e.g. checkpoint_signal = \"SIGUSR1\", checkpoint_notice = \"1m\"")
		return false
	}
	return true
}
