package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// A negative SliceLossDoubling is refused, naming the setting; 0 (lapse at
// once when nothing cheaper is in sight) is valid.
func TestSliceLossDoublingValidate(t *testing.T) {
	c := DefaultConfig()
	c.SliceLossDoubling = -time.Second
	err := c.Validate()
	if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "SliceLossDoubling (-1s) must be >= 0") {
		t.Fatalf("SliceLossDoubling -1s: %v", err)
	}
	c.SliceLossDoubling = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("SliceLossDoubling 0: %v", err)
	}
}
