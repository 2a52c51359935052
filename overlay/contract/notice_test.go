package contract

import (
	"strings"
	"testing"
	"time"
)

func TestParseNotice(t *testing.T) {
	base := map[string]string{"budget": "lab/a", "min_runtime": "1h"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name     string
		meta     map[string]string
		cfg      Config
		signal   string
		notice   time.Duration
		session  bool
		warnKeys []string
		warnText []string
	}{
		{name: "none", meta: with()},
		{name: "signal and notice", meta: with(KeyCheckpointSignal, "SIGUSR1", KeyCheckpointNotice, "2m"), signal: "SIGUSR1", notice: 2 * time.Minute},
		{name: "short names and case", meta: with(KeyCheckpointSignal, " usr2 ", KeyCheckpointNotice, "30s"), signal: "SIGUSR2", notice: 30 * time.Second},
		{name: "clamped to the default cap", meta: with(KeyCheckpointSignal, "SIGTERM", KeyCheckpointNotice, "1h"), signal: "SIGTERM", notice: 10 * time.Minute,
			warnKeys: []string{KeyCheckpointNotice}, warnText: []string{"above the cap of 10m0s (policy { max_checkpoint_notice }); the job gets 10m0s"}},
		{name: "clamped to a configured cap", cfg: Config{MaxNotice: time.Minute}, meta: with(KeyCheckpointSignal, "SIGINT", KeyCheckpointNotice, "5m"),
			signal: "SIGINT", notice: time.Minute, warnKeys: []string{KeyCheckpointNotice}, warnText: []string{"cap of 1m0s"}},
		{name: "SIGKILL cannot be trapped", meta: with(KeyCheckpointSignal, "SIGKILL", KeyCheckpointNotice, "2m"),
			warnKeys: []string{KeyCheckpointSignal}, warnText: []string{"cannot be trapped, so the job could not save anything; the job gets no notice before a stop. Use one of SIGHUP, SIGINT"}},
		{name: "unknown signal", meta: with(KeyCheckpointSignal, "SIGFOO", KeyCheckpointNotice, "2m"),
			warnKeys: []string{KeyCheckpointSignal}, warnText: []string{"not a signal a task can trap"}},
		{name: "bad duration", meta: with(KeyCheckpointSignal, "SIGUSR1", KeyCheckpointNotice, "soon"),
			warnKeys: []string{KeyCheckpointNotice}, warnText: []string{"not a duration; the job gets no notice"}},
		{name: "zero duration", meta: with(KeyCheckpointSignal, "SIGUSR1", KeyCheckpointNotice, "0s"),
			warnKeys: []string{KeyCheckpointNotice}, warnText: []string{"not positive"}},
		{name: "signal without notice", meta: with(KeyCheckpointSignal, "SIGUSR1"),
			warnKeys: []string{KeyCheckpointSignal}, warnText: []string{"no checkpoint_notice says how long"}},
		{name: "notice without signal", meta: with(KeyCheckpointNotice, "2m"),
			warnKeys: []string{KeyCheckpointNotice}, warnText: []string{"no checkpoint_signal says which signal"}},
		{name: "session with a notice", meta: with(KeyClass, "Session", KeyCheckpointSignal, "SIGUSR1", KeyCheckpointNotice, "1m"),
			signal: "SIGUSR1", notice: time.Minute, session: true},
		{name: "session without a notice", meta: with(KeyClass, "session"),
			warnKeys: []string{KeyClass}, warnText: []string{"a session needs checkpoint_signal and checkpoint_notice"}},
		{name: "another class is the user's", meta: with(KeyClass, "eval")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Parse("j", tc.meta, tc.cfg, tree)
			if c.Signal != tc.signal || c.Notice != tc.notice || c.Session != tc.session {
				t.Fatalf("got signal %q notice %v session %v, want %q %v %v", c.Signal, c.Notice, c.Session, tc.signal, tc.notice, tc.session)
			}
			if len(c.Warnings) != len(tc.warnKeys) {
				t.Fatalf("warnings %v, want keys %v", c.Warnings, tc.warnKeys)
			}
			for i, w := range c.Warnings {
				if w.Key != tc.warnKeys[i] || w.Job != "j" || !strings.Contains(w.String(), tc.warnText[i]) {
					t.Errorf("warning %d = %q, want key %s with %q", i, w.String(), tc.warnKeys[i], tc.warnText[i])
				}
				if w.Value != tc.meta[w.Key] {
					t.Errorf("warning %d value %q, want the meta value %q", i, w.Value, tc.meta[w.Key])
				}
			}
		})
	}
}
