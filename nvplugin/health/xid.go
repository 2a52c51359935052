package health

import "fmt"

// DefaultIgnoredXIDs are application-level XIDs that say a program misbehaved,
// not that the GPU did. The list is NVIDIA k8s-device-plugin's
// (internal/rm/health.go): graphics engine exception (13), GPU memory page fault
// (31), GPU stopped processing (43), preemptive cleanup (45), video processor
// exception (68) and context switch timeout (109).
var DefaultIgnoredXIDs = []uint64{13, 31, 43, 45, 68, 109}

// xidNames holds the meaning of the XIDs an operator is most likely to see,
// worded after NVIDIA's XID catalog.
var xidNames = map[uint64]string{
	13:  "graphics engine exception",
	31:  "GPU memory page fault",
	43:  "GPU stopped processing",
	45:  "preemptive cleanup",
	48:  "double-bit ECC error",
	61:  "internal micro-controller breakpoint",
	62:  "internal micro-controller halt",
	63:  "ECC page retirement or row remapping recorded",
	64:  "ECC page retirement or row remapper failure",
	68:  "video processor exception",
	69:  "graphics engine class error",
	74:  "NVLink error",
	79:  "GPU has fallen off the bus",
	92:  "high single-bit ECC error rate",
	94:  "contained ECC error",
	95:  "uncontained ECC error",
	109: "context switch timeout",
	119: "GSP RPC timeout",
	120: "GSP error",
	154: "GPU recovery action changed",
}

// XIDName returns the meaning of xid, or "" when it is not in the table.
func XIDName(xid uint64) string { return xidNames[xid] }

// Classify reports whether xid makes a GPU unhealthy under the ignore list:
// every XID is critical unless it is listed in ignored.
func Classify(xid uint64, ignored []uint64) bool {
	for _, i := range ignored {
		if i == xid {
			return false
		}
	}
	return true
}

// describeXID renders "XID 79 (GPU has fallen off the bus)", or "XID 200" for
// an XID without a known meaning.
func describeXID(xid uint64) string {
	if n := XIDName(xid); n != "" {
		return fmt.Sprintf("XID %d (%s)", xid, n)
	}
	return fmt.Sprintf("XID %d", xid)
}
