package sim

import "testing"

// BenchmarkSimAllot30d1024GPUs is issue 4 §5's figure: the example
// scenario's 30 days on 1,024 GPUs under the allot policy (≤ 2 s wall).
func BenchmarkSimAllot30d1024GPUs(b *testing.B) {
	benchRun(b, newAllotBench(b), 30, 1024)
}
