package policy

import (
	"math"
	"math/rand"
	"testing"
	"time"
)

// TestFreeUntil checks that freeUntil's time is when freePriority next
// changes: the same priority up to just before it, another at it, and
// none within 1,000 hours when it says never.
func TestFreeUntil(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	cfg := DefaultConfig()
	band := cfg.FreeLevels()
	changes, never := 0, 0
	for k := 0; k < 20000; k++ {
		run := freeRun{start: int64(r.Intn(1 << 40)), allocs: int32(1 + r.Intn(16)), waiting: r.Intn(10) == 0}
		resumable := r.Intn(2) == 0
		now := run.start + int64(r.Intn(1<<22))*int64(time.Second/64) - int64(time.Minute)
		cur := band.Low + r.Intn(band.Levels()+2) - 1
		p, until := cfg.freeUntil(cur, run, resumable, now)
		if want := cfg.freePriority(cur, run, resumable, now); p != want {
			t.Fatalf("%+v resumable %v at %d: priority %d, freePriority %d", run, resumable, now, p, want)
		}
		if until == math.MaxInt64 {
			never++
			if q := cfg.freePriority(cur, run, resumable, now+int64(1000*time.Hour)); q != p {
				t.Fatalf("%+v resumable %v at %d: never changes, says freeUntil, but %d -> %d", run, resumable, now, p, q)
			}
			continue
		}
		changes++
		if until <= now {
			t.Fatalf("%+v resumable %v at %d: changes at %d, not after now", run, resumable, now, until)
		}
		if q := cfg.freePriority(cur, run, resumable, until-1); q != p {
			t.Fatalf("%+v resumable %v at %d: %d until %d, but %d just before", run, resumable, now, p, until, q)
		}
		if q := cfg.freePriority(cur, run, resumable, until); q == p {
			t.Fatalf("%+v resumable %v at %d: changes at %d, says freeUntil, but stays %d", run, resumable, now, until, p)
		}
	}
	if changes < 1000 || never < 1000 {
		t.Fatalf("%d changes and %d nevers: the test exercises too few of one", changes, never)
	}
}
