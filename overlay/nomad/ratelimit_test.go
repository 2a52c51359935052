package nomad

import (
	"testing"
	"time"
)

func TestTokenBucket(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := newTokenBucket(10, 3, func() time.Time { return now })
	for i := 0; i < 3; i++ {
		if d := b.reserve(); d != 0 {
			t.Fatalf("burst write %d waits %s, want 0", i, d)
		}
	}
	if d := b.reserve(); d != 100*time.Millisecond {
		t.Fatalf("4th write waits %s, want 100ms at 10/s", d)
	}
	if d := b.reserve(); d != 200*time.Millisecond {
		t.Fatalf("5th write waits %s, want 200ms", d)
	}
	now = now.Add(time.Second) // refills 10 tokens, capped at the burst of 3
	for i := 0; i < 3; i++ {
		if d := b.reserve(); d != 0 {
			t.Fatalf("write %d after refill waits %s, want 0", i, d)
		}
	}
	if d := b.reserve(); d != 100*time.Millisecond {
		t.Fatalf("4th write after refill waits %s, want 100ms (refill capped at the burst)", d)
	}
}
