package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNodeStateText: every state round-trips through its text (the raft
// log, snapshots and the API carry it), the names stored before the one
// type ("active" rows, "in-service" phases, the policy's "normal") still
// read, and anything else is refused with the valid names.
func TestNodeStateText(t *testing.T) {
	for s := NodeNormal; s <= NodeReturned; s++ {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back NodeState
		if err := json.Unmarshal(b, &back); err != nil || back != s {
			t.Fatalf("%s: %s read back as %v (%v)", s, b, back, err)
		}
	}
	for text, want := range map[string]NodeState{"active": NodeNormal, "in-service": NodeNormal, "normal": NodeNormal,
		"reserved": NodeReserved, "cordoned": NodeCordoned, "draining": NodeDraining, "drained": NodeDrained, "returned": NodeReturned} {
		var s NodeState
		if err := s.UnmarshalText([]byte(text)); err != nil || s != want {
			t.Errorf("%q read as %v (%v), want %v", text, s, err, want)
		}
	}
	var s NodeState
	if err := s.UnmarshalText([]byte("sleeping")); err == nil || !strings.Contains(err.Error(), "want one of active, reserved, draining, drained, cordoned, returned") {
		t.Errorf("unknown state: %v", err)
	}
	if _, err := json.Marshal(NodeState(9)); err == nil {
		t.Error("a state out of range encoded")
	}
	if NodeNormal.Phase() != "in-service" || NodeDrained.Phase() != "drained" {
		t.Errorf("phases %q %q", NodeNormal.Phase(), NodeDrained.Phase())
	}
}
