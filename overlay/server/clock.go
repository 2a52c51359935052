package server

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// clockJumpTolerance is how far the wall clock may wander from the
// monotonic clock between two readings before it counts as a jump: NTP
// slews offsets below 128 ms and steps larger ones; a minute is far beyond
// any step a healthy host takes, and equals the ledger's default skew.
const clockJumpTolerance = time.Minute

// leaderClock gives the leader's timestamps, the ones every replicated
// entry carries. It reads Config.Clock and checks it against a monotonic
// clock: when the wall clock jumps (a bad NTP step, an operator's date -s,
// a VM resumed from a snapshot) by more than clockJumpTolerance between two
// readings, the jump is logged and not obeyed: time keeps running from the
// last good reading on the monotonic clock, until the wall clock agrees with
// it again. Safe for concurrent use.
type leaderClock struct {
	wall func() time.Time
	mono func() time.Duration // nil: no check (a test's clock is trusted as it is)
	log  hclog.Logger

	mu         sync.Mutex
	anchored   bool
	anchorWall time.Time
	anchorMono time.Duration
	jump       time.Duration // the jump being ignored; 0 when none
	jumps      int64         // jumps detected, for metrics
}

// newLeaderClock checks cfg's Clock against its Monotonic clock. cfg is
// the configuration as given (before defaults): with no Clock the server
// uses time.Now and the process's monotonic clock; with one (tests), no
// monotonic clock unless Monotonic gives one.
func newLeaderClock(cfg *Config, log hclog.Logger) *leaderClock {
	c := &leaderClock{wall: cfg.Clock, mono: cfg.Monotonic, log: log}
	if c.wall == nil {
		start := time.Now()
		c.wall = time.Now
		if c.mono == nil {
			c.mono = func() time.Duration { return time.Since(start) } // monotonic: time.Now carries its reading
		}
	}
	return c
}

// Now returns the leader's time, in UTC.
func (c *leaderClock) Now() time.Time {
	w := c.wall().UTC()
	if c.mono == nil {
		return w
	}
	m := c.mono()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.anchored {
		c.anchored, c.anchorWall, c.anchorMono = true, w, m
		return w
	}
	want := c.anchorWall.Add(m - c.anchorMono)
	if d := w.Sub(want); d > clockJumpTolerance || d < -clockJumpTolerance {
		if c.jump == 0 {
			c.jumps++
			c.log.Error("wall clock jumped: not obeyed; timestamps follow the monotonic clock until the wall clock agrees again",
				"wall", w.Format(time.RFC3339), "monotonic", want.Format(time.RFC3339), "jump", d.String())
		}
		c.jump = d
		return want
	}
	if c.jump != 0 {
		c.log.Info("wall clock agrees with the monotonic clock again", "wall", w.Format(time.RFC3339), "ignored_jump", c.jump.String())
		c.jump = 0
	}
	c.anchorWall, c.anchorMono = w, m
	return w
}

// Jumps returns how many clock jumps were detected.
func (c *leaderClock) Jumps() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.jumps
}
