// Package nvml is allot-nvml's only door to NVIDIA's NVML (github.com/NVIDIA/go-nvml):
// it enumerates GPUs, reads their health and telemetry, and waits for XID
// events, returning plain values. Fake mode serves go-nvml's own mock machines
// (pkg/nvml/mock/dgxh100 and friends) with telemetry and injected faults wired in.
package nvml
