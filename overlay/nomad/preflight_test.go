package nomad

import "testing"

func TestMajorMinor(t *testing.T) {
	for v, want := range map[string][2]int{"2.0.6-dev": {2, 0}, "1.10.3": {1, 10}, "1.9": {1, 9}, "": {0, 0}} {
		if mj, mn := majorMinor(v); mj != want[0] || mn != want[1] {
			t.Errorf("majorMinor(%q) = %d.%d, want %d.%d", v, mj, mn, want[0], want[1])
		}
	}
}
